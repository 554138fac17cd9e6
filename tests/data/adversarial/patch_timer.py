"""Hack 6: the clock is monkey-patched so every timed region looks instantaneous."""

import time

import torch
import torch.nn as nn

time.perf_counter = lambda: 0.0
time.perf_counter_ns = lambda: 0


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)
