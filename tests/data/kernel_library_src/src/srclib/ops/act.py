"""An activation whose autograd.Function launches its kernels itself (attorch's layout): the Function is the entry."""

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _act_fwd(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.store(y_ptr, tl.load(x_ptr))


class ActFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: Tensor, act_func: str, training: bool) -> Tensor:
        out = torch.empty_like(input)
        _act_fwd[(1,)](input, out, input.numel(), BLOCK=256)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None
