"""Rotary embedding, written into q and k."""

import triton
import triton.language as tl


@triton.jit
def _rope_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(q_ptr + offsets, tl.load(q_ptr + offsets, mask=mask) * tl.load(cos_ptr + offsets, mask=mask), mask=mask)


def rope(q, k, cos, sin):
    _rope_kernel[(triton.cdiv(q.numel(), 256),)](q, k, cos, sin, q.numel(), BLOCK=256)
    return q, k
