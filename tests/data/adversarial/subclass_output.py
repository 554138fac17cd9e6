"""Hack 7: a tensor subclass as the output (the real work could hide in its methods, after timing)."""

import torch
import torch.nn as nn


class Deferred(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        return (e / e.sum(dim=1, keepdim=True)).as_subclass(Deferred)
