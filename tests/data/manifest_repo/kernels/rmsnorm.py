"""RMS normalisation on the CPU, written out by hand (the kernel a bot would rewrite)."""

import torch

EPS = 1e-6


def rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    inv = torch.rsqrt((x * x).sum(dim=-1, keepdim=True) / x.shape[-1] + EPS)
    return x * inv * weight


def make_inputs(rows: int, cols: int):
    return [torch.randn(rows, cols), torch.rand(cols) + 0.5]
