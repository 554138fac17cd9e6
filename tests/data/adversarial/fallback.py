"""Hack 4: a "custom kernel" that always fails, silently falling back to the framework's own op."""

import torch
import torch.nn as nn


def _custom_softmax(x):
    raise RuntimeError("kernel not built")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return _custom_softmax(x)
        except Exception:
            return torch.softmax(x, dim=1)
