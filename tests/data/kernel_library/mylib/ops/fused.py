"""(x + y)^2 * scale, launched through a private helper from kernels defined in another module."""

import torch
import triton

from mylib.kernels.fused_kernels import _fused_add_mul_kernel

BLOCK = 1024


def _launch(x: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _fused_add_mul_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, scale, n, BLOCK=BLOCK)
    return out


def fused_add_mul(x: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
    return _launch(x, y, scale)
