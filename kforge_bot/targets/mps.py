"""The Apple GPU target through `torch.mps`.

torch.mps has no per-stream device events exposed for timing regions the way CUDA does in every release we
support, so the timer synchronizes the device and reads the host clock around the region: correct for one
queue, coarser for tiny kernels. Not run in this project's CI (no Apple hardware there).
"""

from __future__ import annotations

import time

import torch

from kforge_bot.targets.base import Target, Timer


class MpsSyncTimer(Timer):
    def __init__(self) -> None:
        self._clock = time.perf_counter_ns
        self._sync = torch.mps.synchronize
        self._t0 = self._t1 = 0

    def start(self) -> None:
        self._sync()
        self._t0 = self._clock()

    def stop(self) -> None:
        self._sync()
        self._t1 = self._clock()

    def elapsed_ms(self) -> float:
        return (self._t1 - self._t0) / 1e6


class MpsTarget(Target):
    kind = "mps"

    @property
    def device(self) -> torch.device:
        return torch.device("mps")

    @classmethod
    def available(cls) -> bool:
        return hasattr(torch.backends, "mps") and torch.backends.mps.is_available()

    def device_name(self) -> str:
        return "Apple GPU (mps)"

    def synchronize(self) -> None:
        torch.mps.synchronize()

    def timer(self) -> Timer:
        return MpsSyncTimer()
