"""A KernelBench problem whose code gives another answer when torch.compile traces it: a compiled baseline that is
wrong, which must be reported and dropped, never used."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return x * 0.5
        return x * 2.0


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return []
