"""A problem with weights (KernelBench format): the candidate and the baseline hold the same parameters."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.proj = nn.Linear(features, features)
        self.register_buffer("scale", torch.full((features,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x)) * self.scale


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return [64]
