"""Hack 3 on a CPU: hand the work to a thread and return at once, so the work runs after the timed
region ends (the CPU has no streams; a thread is its side stream). Honest during the first calls (the
correctness cases), so only the timed calls give it away."""

import threading
import time

import torch
import torch.nn as nn


def _work(x, out):
    time.sleep(0.05)  # a kernel that takes a while
    e = (x - x.amax(dim=1, keepdim=True)).exp()
    torch.div(e, e.sum(dim=1, keepdim=True), out=out)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = torch.empty_like(x)
        worker = threading.Thread(target=_work, args=(x, out))
        worker.start()
        if self.calls <= 8:
            worker.join()
        return out
