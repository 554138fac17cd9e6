"""RMSNorm in Triton: y = x / sqrt(mean(x^2) + eps) * weight, one program per row."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

NUM_WARPS = 1
EPS = 1e-6


@triton.jit
def _rmsnorm_kernel(out_ptr, x_ptr, w_ptr, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(out_ptr + row * stride + offs, (x / rms * w).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    _rmsnorm_kernel[(n_rows,)](out, x, weight, x.stride(0), n_cols, EPS, BLOCK_SIZE=block, num_warps=NUM_WARPS)
    return out


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(x.dtype)


def make_inputs(rows: int, cols: int, dtype: str = "bfloat16") -> tuple[torch.Tensor, torch.Tensor]:
    dt = getattr(torch, dtype)
    return torch.randn(rows, cols, dtype=dt), (1.0 + 0.1 * torch.randn(cols)).to(dt)
