"""A module-style kernel with a constructor argument."""

import torch
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


def make_inputs():
    return [torch.randn(32, 32)]
