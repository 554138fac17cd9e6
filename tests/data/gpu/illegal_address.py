import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bad(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    # Stores far past the end of the buffer: an illegal memory access.
    tl.store(y_ptr + offs + (1 << 40), tl.load(x_ptr + offs, mask=offs < n))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _bad[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
