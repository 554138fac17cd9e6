"""GPU test problem: y = 2 * x + 1 over a 1-D fp32 tensor, in KernelBench format."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(1 << 22)]


def get_init_inputs():
    return []
