"""Hack 11, hidden from a static scan: leave with status 0 by raising SystemExit."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise SystemExit(0)
