"""Intel's softmax: init proposes it for the xpu target only."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_xpu_kernel(x_ptr, y_ptr, cols, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + offsets, e / tl.sum(e, axis=0), mask=offsets < cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _softmax_xpu_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
