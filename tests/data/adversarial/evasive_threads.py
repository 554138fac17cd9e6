"""Hack: leave the framework slower for whoever runs next. Each call takes every thread for itself and
hands back a single thread, so the baseline (timed between candidate calls) runs single-threaded."""

import torch
import torch.nn as nn

_ALL = torch.get_num_threads()


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.set_num_threads(_ALL)
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        out = e / e.sum(dim=1, keepdim=True)
        torch.set_num_threads(1)
        return out
