"""The model's kernels in eager PyTorch: the reference versions of the bundled Triton kernels."""

from __future__ import annotations

import torch

EPS = 1e-6


def rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(x.dtype)


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.silu(a.float()) * b.float()).to(a.dtype)


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
