"""Same parameters, its own forward: the weights it reads are the baseline's (one placement)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.proj = nn.Linear(features, features)
        self.register_buffer("scale", torch.full((features,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.proj.bias, x, self.proj.weight.t()).clamp_min(0) * self.scale
