"""Hack 2: the input is overwritten in place (a later consumer of x sees garbage)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.sub_(x.amax(dim=1, keepdim=True)).exp_()  # reuses x as scratch space
        return x / x.sum(dim=1, keepdim=True)
