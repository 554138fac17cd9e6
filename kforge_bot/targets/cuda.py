"""The CUDA target: device events on the current stream, whole-device synchronization."""

from __future__ import annotations

import ctypes
import math
from typing import Any, Callable, Mapping, NamedTuple

import torch

from kforge_bot.targets.base import Target, Timer


# Bound when the worker imports this module, before any candidate code exists: a patch of the Event class
# installed inside a candidate's call (and undone before anyone looks) cannot reach the timer.
_record = torch.cuda.Event.record
_event_sync = torch.cuda.Event.synchronize
_elapsed = torch.cuda.Event.elapsed_time
_device_sync = torch.cuda.synchronize
_sleep = torch.cuda._sleep

# How a sample begins (`CudaTarget.settle`). A kernel's time depends on what the GPU did just before it (it runs
# slower after a stretch of low activity than back to back with itself: benchmarks/results/agreement_h200.md), so
# a paired loop whose candidate follows a long, low-occupancy baseline in half its samples understated the
# candidate. Each sample now begins after the same device-wide work of fixed
# length: the cache flush, repeated for SETTLE_MS, queued without a host wait, so the timed calls follow it
# directly whichever side ran before. It also serves as the device's lead over the host (a longer one when the
# host needs longer to queue a sample's calls), capped at MAX_LEAD_MS. Flushes are queued for at most MAX_FLUSH_LEAD_MS
# of it (a launch queue holds about a thousand of them: a longer run of flushes would make the host wait for room
# before it queued the sample's calls); a longer lead starts with a spin kernel for the rest. A cap shorter than
# the host's time to launch a call (recurrent networks: benchmarks/results/kernelbench_l3_aa_h200.md) leaves the
# device waiting on the host inside the timed window, and A/A intervals widen.
SETTLE_MS = 1.0
MAX_LEAD_MS = 500.0
MAX_FLUSH_LEAD_MS = 25.0
# SETTLE_MS = 0 is the earlier loop (kept for benchmarks/agreement.py): one flush, a host wait, then a
# one-block spin of this many cycles (25-100 us) so the host's launch latency falls outside the interval.
PREFILL_CYCLES = 100_000
MARK_LEAD_MS = 0.2  # the device's lead over the host at the settle's mark: longer than the host's launches behind it
# Persisting L2 (gpu-mode/pygpubench#49): a call may reserve an L2 carveout (cuCtxSetLimit) and mark data
# persisting (a stream access-policy window); the flush's ordinary writes do not evict such lines, so they stayed
# into later samples and took L2 from them, the baseline's included (a reference ran much slower beside such a
# candidate: benchmarks/results/persisting_l2_h200.md). Each settle demotes every persisting
# line and releases the carveout before the flush, which then evicts them: a call keeps data in L2 only within
# its own sample.
_LIMIT_PERSISTING_L2 = 0x06  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE (cuda.h)


def _bind_persisting_l2_reset(library: str = "libcuda.so.1") -> Callable[[], bool] | None:
    """Bound at import, before any candidate code exists, like the timer's functions above. `library`: the CUDA
    driver (another name only in tests, for a stand-in with the same three functions)."""
    try:
        driver = ctypes.CDLL(library)
        set_limit, get_limit, reset = driver.cuCtxSetLimit, driver.cuCtxGetLimit, driver.cuCtxResetPersistingL2Cache
    except (OSError, AttributeError):
        return None  # no driver, or one older than CUDA 11 (no persisting L2 to reset)
    set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
    get_limit.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
    size = ctypes.c_size_t()

    def reset_persisting_l2() -> bool:
        """True when no line is left persisting and no carveout reserved (False: the driver refused, e.g. a
        device without persisting L2, where there is nothing to reset)."""
        if get_limit(ctypes.byref(size), _LIMIT_PERSISTING_L2) != 0:
            return False
        if size.value and set_limit(_LIMIT_PERSISTING_L2, 0) != 0:
            return False
        return reset() == 0

    return reset_persisting_l2


_reset_persisting_l2 = _bind_persisting_l2_reset()
_cycles_per_ms: list[float] = []  # the spin's speed, measured once per process
_fill_ms: list[float] = []  # one flush's time, measured once per process


def _spin_cycles_per_ms() -> float:
    if not _cycles_per_ms:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        _record(start)
        _sleep(1_000_000)
        _record(end)
        _event_sync(end)
        _cycles_per_ms.append(1_000_000 / max(float(_elapsed(start, end)), 1e-3))
    return _cycles_per_ms[0]


class SettlePlan(NamedTuple):
    flushes: int
    spin_cycles: int
    cycles_per_ms: float
    expected_ms: float  # the settle's own work after its mark (Target.settle's answer)


def settle_plan(lead_ms: float, own: Mapping[str, float], figures: Mapping[str, float] | None = None) -> SettlePlan:
    """What a settle of `lead_ms` runs: flushes for up to MAX_FLUSH_LEAD_MS of it, a spin for the rest. Planned from
    this process's own figures (`own`, CudaTarget.calibrate), or from `figures`, another process's, where they are
    within sense of its own: base and head in workers of their own each measured the flush, and rounded the lead
    to whole flushes from it; 3-4% apart, their figures differed by 42 us over 12 flushes, and near a boundary
    one ran a flush more (85 us): honest heads were rejected for hidden work (benchmarks/results/
    gate_hidden_work_h100.md). Planned from the base's figures, both run the same work and expect the same."""
    fill_ms, cycles_per_ms = (_within_sense(figures, own, key) for key in ("flush_ms", "spin_cycles_per_ms"))
    busy_ms = min(MAX_LEAD_MS, max(SETTLE_MS, lead_ms))
    if SETTLE_MS <= 0:
        return SettlePlan(0, int(busy_ms * cycles_per_ms), cycles_per_ms, 0.0)
    flush_ms = min(busy_ms, MAX_FLUSH_LEAD_MS)
    flushes = max(1, math.ceil(flush_ms / fill_ms))
    spin_ms = busy_ms - flush_ms
    return SettlePlan(flushes, int(spin_ms * cycles_per_ms), cycles_per_ms, flushes * fill_ms + spin_ms)


def _within_sense(figures: Mapping[str, float] | None, own: Mapping[str, float], key: str) -> float:
    """figures[key] where it is a number within half to twice this process's own figure, else the own figure."""
    mine = float(own[key])
    try:
        given = float((figures or {}).get(key, 0.0))
    except (TypeError, ValueError):
        return mine
    return given if mine / 2 <= given <= mine * 2 else mine


class CudaEventTimer(Timer):
    def __init__(self) -> None:
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._after = torch.cuda.Event(enable_timing=True)
        self._settle = torch.cuda.Event(enable_timing=True)
        self._settle_marked = False

    def mark_settle(self) -> None:
        _record(self._settle)
        self._settle_marked = True

    def settle_ms(self) -> float:
        return float(_elapsed(self._settle, self._start)) if self._settle_marked else 0.0

    def start(self) -> None:
        _record(self._start)

    def stop(self) -> None:
        _record(self._end)

    def elapsed_ms(self) -> float:
        _event_sync(self._end)
        return float(_elapsed(self._start, self._end))

    def busy_after_ms(self) -> float:
        # Recorded after the device-wide synchronize: its timestamp follows every stream's last work, so the gap
        # from the region's end holds whatever ran on after it (plus the host's wake-up and launch, alike for all).
        _record(self._after)
        _event_sync(self._after)
        return float(_elapsed(self._end, self._after))


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

    def settle(self, lead_ms: float = 0.0, mark: Callable[[], None] | None = None,
               figures: Mapping[str, float] | None = None) -> float:
        plan = settle_plan(lead_ms, self.calibrate(), figures)
        _device_sync(self.index)  # the last sample's outputs are checked and poisoned: nothing left running
        if _reset_persisting_l2 is not None:
            _reset_persisting_l2()  # before the flush, which then evicts the demoted lines
        if SETTLE_MS <= 0:
            if mark is not None:
                mark()
            self.flush_cache()
            _device_sync(self.index)
            _sleep(max(PREFILL_CYCLES, plan.spin_cycles))
            return 0.0  # the earlier loop's figure, as it was
        if mark is not None:
            # The device busy while the host records the mark and queues the first flush: the settle's length is
            # then the device's alone. Marked on an idle device, it held the host's launch latency too, which
            # differs from process to process (base and head in workers of their own) by more than the check's
            # floor: honest A/A heads were rejected for hidden work
            # (benchmarks/results/gate_decision_cost_h100_device.md).
            _sleep(int(MARK_LEAD_MS * plan.cycles_per_ms))
            mark()
        if plan.spin_cycles:
            _sleep(plan.spin_cycles)
        for _ in range(plan.flushes):
            self.flush_cache()
        return plan.expected_ms

    def calibrate(self) -> dict[str, float]:
        return {"flush_ms": self._flush_ms(), "spin_cycles_per_ms": _spin_cycles_per_ms()}

    def _flush_ms(self) -> float:
        """One flush's time on this device (a 256 MB fill), measured once per process: the fastest of a few rounds
        after a warm-up, as the device runs them back to back in a settle."""
        if not _fill_ms:
            for _ in range(4):
                self.flush_cache()
            rounds = []
            for _ in range(5):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                _record(start)
                for _ in range(8):
                    self.flush_cache()
                _record(end)
                _event_sync(end)
                rounds.append(float(_elapsed(start, end)) / 8)
            _fill_ms.append(max(min(rounds), 1e-3))
        return _fill_ms[0]

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
