"""The ARM CPU backend's add: no GPU target runs it."""

import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.store(y_ptr, tl.load(x_ptr))


def add(x, y):
    _add_kernel[(1,)](x, y, x.numel(), BLOCK=128)
    return y
