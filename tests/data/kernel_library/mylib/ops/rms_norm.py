"""RMSNorm forward and backward; the forward launcher returns more than its output."""

import torch
import triton
import triton.language as tl

from ..utils import calculate_settings, is_hip


@triton.jit
def _rms_norm_fwd_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
    w = tl.load(w_ptr + offsets, mask=mask)
    tl.store(y_ptr + row * cols + offsets, x * rstd * w, mask=mask)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _rms_norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < cols
    dy = tl.load(dy_ptr + row * cols + offsets, mask=mask, other=0.0)
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0)
    w = tl.load(w_ptr + offsets, mask=mask)
    rstd = tl.load(rstd_ptr + row)
    m = dy * w
    dx = rstd * m - rstd * rstd * rstd * x * tl.sum(m * x, axis=0) / cols
    tl.store(dx_ptr + row * cols + offsets, dx, mask=mask)


def rms_norm_forward(x: torch.Tensor, w: torch.Tensor, eps: float):
    rows, cols = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    BLOCK_SIZE, num_warps = calculate_settings(cols)
    if is_hip():
        num_warps = min(num_warps, 16)
    _rms_norm_fwd_kernel[(rows,)](x, w, y, rstd, cols, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y, rstd, BLOCK_SIZE, num_warps


def rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    dx = torch.empty_like(x)
    BLOCK_SIZE, num_warps = calculate_settings(cols)
    _rms_norm_bwd_kernel[(rows,)](dy, x, w, rstd, dx, cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return dx
