"""SwiGLU's gate in Triton: silu(a) * b, elementwise over two [rows, cols] projections."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024
NUM_WARPS = 4


@triton.jit
def _swiglu_kernel(out_ptr, a_ptr, b_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (a * tl.sigmoid(a) * b).to(out_ptr.dtype.element_ty), mask=mask)


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty_like(a)
    n = a.numel()
    _swiglu_kernel[(triton.cdiv(n, BLOCK),)](out, a, b, n, BLOCK_SIZE=BLOCK, num_warps=NUM_WARPS)
    return out


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.silu(a.float()) * b.float()).to(a.dtype)


def make_inputs(rows: int, cols: int, dtype: str = "bfloat16") -> tuple[torch.Tensor, torch.Tensor]:
    dt = getattr(torch, dtype)
    return torch.randn(rows, cols, dtype=dt), torch.randn(rows, cols, dtype=dt)
