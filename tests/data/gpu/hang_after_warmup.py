"""Correct and fast for its first calls (the correctness cases), then a kernel that never returns: a hang that
only the no-progress limit catches in seconds, not the evaluation's whole timeout."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine(x_ptr, y_ptr, flag_ptr, n, spin: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if spin:
        flag = tl.load(flag_ptr, volatile=True)
        while flag == 0:  # nothing ever sets the flag
            flag = tl.load(flag_ptr, volatile=True)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0 + 1.0, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = torch.empty_like(x)
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        _affine[(triton.cdiv(x.numel(), 1024),)](x, y, flag, x.numel(), spin=self.calls > 6, BLOCK=1024)
        return y
