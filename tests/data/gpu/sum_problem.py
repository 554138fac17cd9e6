"""GPU test problem: the sum of an 8 MB fp32 vector, in KernelBench format (a read of the input and nothing else)."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum()


def get_inputs():
    return [torch.randn(1 << 21)]


def get_init_inputs():
    return []
