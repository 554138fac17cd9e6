"""A wrong candidate: y = 2 * x + 1 everywhere but the last element (for the device-memory output path)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2.0 + 1.0
        y[-1] += 1.0
        return y
