"""The CUDA target: device events on the current stream, whole-device synchronization."""

from __future__ import annotations

from typing import Any

import torch

from kforge_bot.targets.base import Target, Timer


# Bound when the worker imports this module, before any candidate code exists: a patch of the Event class
# installed inside a candidate's call (and undone before anyone looks) cannot reach the timer.
_record = torch.cuda.Event.record
_event_sync = torch.cuda.Event.synchronize
_elapsed = torch.cuda.Event.elapsed_time
_device_sync = torch.cuda.synchronize
_sleep = torch.cuda._sleep

# Spin this many clock cycles (25-100 us on current GPUs) before the start event: the device stays busy while
# the host records the event and enqueues the timed calls, so the host's launch latency falls outside the
# interval instead of being counted as kernel time (it dominated eager samples of ~25 us kernels).
PREFILL_CYCLES = 100_000
# A longer lead, asked for when the host needs longer to queue a sample's calls (timing.measure_pair), is capped
# (about 25 ms at 2 GHz): a sample never waits longer than that for its region to begin.
MAX_PREFILL_CYCLES = 50_000_000
_cycles_per_ms: list[float] = []  # the spin's speed, measured once per process


def _spin_cycles_per_ms() -> float:
    if not _cycles_per_ms:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        _record(start)
        _sleep(1_000_000)
        _record(end)
        _event_sync(end)
        _cycles_per_ms.append(1_000_000 / max(float(_elapsed(start, end)), 1e-3))
    return _cycles_per_ms[0]


class CudaEventTimer(Timer):
    def __init__(self) -> None:
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self, lead_ms: float = 0.0) -> None:
        cycles = PREFILL_CYCLES if lead_ms <= 0 else int(lead_ms * _spin_cycles_per_ms())
        _sleep(min(MAX_PREFILL_CYCLES, max(PREFILL_CYCLES, cycles)))
        _record(self._start)

    def stop(self) -> None:
        _record(self._end)

    def elapsed_ms(self) -> float:
        _event_sync(self._end)
        return float(_elapsed(self._start, self._end))


class CudaTarget(Target):
    kind = "cuda"

    @classmethod
    def available(cls) -> bool:
        return torch.cuda.is_available()

    def device_name(self) -> str:
        return torch.cuda.get_device_name(self.index)

    def synchronize(self) -> None:
        _device_sync(self.index)

    def timer(self) -> Timer:
        return CudaEventTimer()

    def memory_stats(self) -> dict[str, Any]:
        return {"max_allocated_bytes": torch.cuda.max_memory_allocated(self.index)}

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        props = torch.cuda.get_device_properties(self.index)
        info.update(
            compute_capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            memory_bytes=props.total_memory,
            cuda=torch.version.cuda,
            l2_bytes=getattr(props, "L2_cache_size", None),
        )
        return info
