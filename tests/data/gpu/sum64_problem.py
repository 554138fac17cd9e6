"""GPU test problem: GPU MODE vectorsum's reference (the float64 sum of an 8 MB fp32 vector), in KernelBench format.

Its 16 MB float64 temporary is written and read back through L2: a call that leaves lines persisting in L2 takes
that room from whatever runs after it.
"""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float64).sum().to(torch.float32)


def get_inputs():
    return [torch.randn(1 << 21)]


def get_init_inputs():
    return []
