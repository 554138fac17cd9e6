"""Issue 38's attack 3.1: a softmax that does its work twice (about 2x slower than the baseline) and starts helper
processes that spin only while it is not running, i.e. while the baseline is timed. Threads are watched; these are
processes, so before the harness counted them the comparison read the candidate as several times faster."""

import multiprocessing
import os
import time

import torch
import torch.nn as nn

_context = multiprocessing.get_context("fork")
_mine = _context.Value("i", 0, lock=False)  # 1 while this candidate's call runs
_helpers: list = []


def _spin(mine) -> None:
    while True:
        if mine.value:
            time.sleep(0.0002)  # quiet while the candidate is timed
        else:
            for _ in range(20000):  # busy while anything else (the baseline) runs
                pass


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _helpers:
            for _ in range(os.cpu_count() or 1):
                helper = _context.Process(target=_spin, args=(_mine,), daemon=True)
                helper.start()
                _helpers.append(helper)
        _mine.value = 1
        try:
            for _ in range(2):
                e = (x - x.amax(dim=1, keepdim=True)).exp()
                out = e / e.sum(dim=1, keepdim=True)
            return out
        finally:
            _mine.value = 0
