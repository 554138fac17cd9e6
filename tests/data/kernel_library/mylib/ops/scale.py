"""alpha * x, with its kernel wrapped by a call rather than a decorator."""

import torch
import triton
import triton.language as tl


def _scale_impl(x_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * alpha, mask=mask)


_scale_kernel = triton.jit(_scale_impl)


def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 256),)](x, out, alpha, n, BLOCK=256)
    return out
