"""Correct output, then input a changed in place: check_implementation (on a copy) is satisfied, the harness is not."""

import torch


def custom_kernel(data):
    a, b, out = data
    torch.add(a, b, alpha=2, out=out)
    out.clamp_(min=0)
    a.mul_(0.5)
    return out
