"""Within task.yml's loose tolerance (1e-2) but not within check_implementation's (1e-6): the problem's own check
must catch it."""

import torch


def custom_kernel(data):
    a, b, out = data
    torch.add(a, b, alpha=2, out=out)
    out.clamp_(min=0)
    return out.add_(1e-3)
