import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _spin(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    i = 0
    while tl.sum(v) == tl.sum(v):  # never false for finite inputs: the kernel spins forever
        i += 1
    tl.store(y_ptr + offs, v * 2.0 + 1.0, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _spin[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
