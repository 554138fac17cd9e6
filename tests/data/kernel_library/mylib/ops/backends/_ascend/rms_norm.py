"""Another vendor's RMSNorm: init must leave it out when proposing cuda."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_npu_kernel(x_ptr, y_ptr, cols, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < cols), mask=offsets < cols)


def rms_norm_forward(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    y = torch.empty_like(x)
    _rms_norm_npu_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK_SIZE=1024)
    return y
