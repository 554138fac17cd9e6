"""One small protocol for every kind of device the harness can measure on.

A target knows how to place tensors, wait for the device, time a region with the device's own clock,
flush the last-level cache between timed runs, and describe itself. Only the worker (a child process)
touches the device; the parent uses `available()` and `describe()` through a probe.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, Callable, Mapping

import torch

# The flush buffer is larger than any L2/LLC we target (H200 60 MB, B200 126 MB, Arc B580 18 MB).
GPU_FLUSH_BYTES = 256 * 1024 * 1024
CPU_FLUSH_BYTES = 64 * 1024 * 1024


class Timer(ABC):
    """Times one region. `stop()` only marks the end; `elapsed_ms()` waits for the device."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def elapsed_ms(self) -> float: ...

    def mark_settle(self) -> None:
        """Called by `Target.settle` once the last sample's work is done, before the settle's own work is queued
        (on a device that runs ahead of the host, behind a short lead of the device's own, so that the gap to the
        region's start holds no launch of the host's)."""

    def settle_ms(self) -> float:
        """After `elapsed_ms`: from `mark_settle` to the region's start, on the device's clock: the settle's fixed
        work, and whatever else the device ran beside it (work a call started before the region, on a stream
        that does not wait for the current one, stretches it). A synchronous device has no such gap."""
        return 0.0

    def busy_after_ms(self) -> float:
        """Called once the whole device is synchronized: how long after the region's end the device was still
        busy, plus the host's wait (about the same for every region). Work the region's calls left running on
        another stream shows here and not in `elapsed_ms`. A synchronous device runs nothing after the region."""
        return 0.0


class HostTimer(Timer):
    """For synchronous devices (the CPU): a monotonic host clock is the device clock."""

    def __init__(self) -> None:
        self._clock = time.perf_counter_ns  # bound now: a later patch of time.perf_counter changes nothing
        self._t0 = self._t1 = 0

    def start(self) -> None:
        self._t0 = self._clock()

    def stop(self) -> None:
        self._t1 = self._clock()

    def elapsed_ms(self) -> float:
        return (self._t1 - self._t0) / 1e6


class Target(ABC):
    kind: str = ""

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self._flush_buffer: torch.Tensor | None = None

    @classmethod
    @abstractmethod
    def available(cls) -> bool: ...

    @property
    def device(self) -> torch.device:
        return torch.device(self.kind, self.index) if self.kind != "cpu" else torch.device("cpu")

    @abstractmethod
    def device_name(self) -> str: ...

    def synchronize(self) -> None:
        """Wait for all work on the device (every stream), not just the current stream."""

    @abstractmethod
    def timer(self) -> Timer: ...

    def flush_cache(self) -> None:
        """Overwrite a buffer larger than the last-level cache so no run starts with warm data."""
        if self._flush_buffer is None:
            size = CPU_FLUSH_BYTES if self.kind == "cpu" else GPU_FLUSH_BYTES
            self._flush_buffer = torch.empty(size // 4, dtype=torch.int32, device=self.device)
        self._flush_buffer.fill_(1)

    def calibrate(self) -> dict[str, float]:
        """Measure, before any candidate code exists (the worker's trusted setup), what `settle` measures once per
        process (a call inside a candidate's first sample could otherwise skew it), and return those figures."""
        return {}

    def settle(self, lead_ms: float = 0.0, mark: Callable[[], None] | None = None,
               figures: Mapping[str, float] | None = None) -> float:
        """Ready the device for a timed sample: no warm data in the cache, earlier work finished. `lead_ms`: on an
        asynchronous device, leave it busy for about that long, so the host can queue the sample's calls before
        the device reaches them (ignored where the host clock is the device clock). `mark()` runs once the last
        sample's work is done, before the settle's work (Timer.mark_settle). Returns how long this process
        expects the settle's own work after the mark to take (Sample.busy_before_ms is the settle's time beyond
        it); 0 where nothing runs after the mark but the settle itself. `figures`: another process's `calibrate`
        figures to plan the settle's work with (base and head in workers of their own run the same)."""
        if mark is not None:
            mark()
        self.flush_cache()
        self.synchronize()
        return 0.0

    def memory_stats(self) -> dict[str, Any]:
        return {}

    def describe(self) -> dict[str, Any]:
        """Identity for reports and cache keys: what could change a timing."""
        return {
            "kind": self.kind,
            "device_name": self.device_name(),
            "torch": torch.__version__,
        }
