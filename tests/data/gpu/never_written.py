import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Returns uninitialised memory: right only if it happens to hold a freed reference result."""

    def forward(self, x):
        return torch.empty_like(x)
