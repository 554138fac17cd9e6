"""Kernels with no launcher of their own: mylib.ops.fused launches them."""

import triton
import triton.language as tl


@triton.jit
def _square(v):
    return v * v


@triton.jit
def _fused_add_mul_kernel(x_ptr, y_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, _square(x + y) * scale, mask=mask)
