"""Hack 11: exit with status 0 in the middle of the evaluation, hoping silence reads as success."""

import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sys.exit(0)
