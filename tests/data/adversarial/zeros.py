"""Hack 9: return zeros (passes a pure absolute tolerance wherever the true outputs are tiny)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
