"""A small KernelBench problem for the compiled baseline on the CPU (inductor's C++ backend)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * 2.0


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return [32]
