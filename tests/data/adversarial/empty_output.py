"""Hack 1: the output buffer is never written (torch.empty), hoping it holds a freed result."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)
