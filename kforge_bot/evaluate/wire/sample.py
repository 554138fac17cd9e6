"""One timed sample on the device's own clock (`timed_sample`): the settle before it (Target.settle), `k` calls
between two device timestamps, and the region's end: how long the device stayed busy after it and how long the
settle took, the figures of the hidden-work check (wire.paired_times). `calibrate` measures, once per worker and
before any candidate code exists, the host's own share of those figures. The loops that pair samples are
wire.timing's (one worker) and evaluate.pair_driver's (base and head in workers of their own).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, NamedTuple

from kforge_bot.evaluate.wire.paired_times import upper_quartile
from kforge_bot.targets.base import Target, Timer

_monotonic = time.monotonic  # bound at import, before any candidate code exists


class Sample(NamedTuple):
    ms: float  # per call
    out: Any  # the last call's output
    index: int  # its input set
    host_ms: float  # the host's time to issue the calls
    busy_after_ms: float  # the device's work after the timed region's end (Timer.busy_after_ms, the host's sync)
    # The settle before the region beyond its own expected work (Timer.settle_ms less what Target.settle returned):
    # whatever ran beside it. On an H100 two workers' flush counts for one lead differed by one (85 us) in a
    # quarter of split A/A decisions, and honest heads were rejected (benchmarks/results/gate_hidden_work_h100.md).
    busy_before_ms: float


def timed_sample(target: Target, fn: Callable[[list[Any]], Any], input_sets: list[list[Any]], sets: list[int],
                 lead_ms: float = 0.0, kept: list[Any] | None = None,
                 settle_figures: Mapping[str, float] | None = None) -> Sample:
    """Time consecutive calls, one on each input set of `sets` (sample_sets). `kept`: every call's output is
    appended (and so stays allocated until the caller is done with it). `settle_figures`: the figures the settle
    plans with (Target.settle), where not this process's own."""
    timer = target.timer()
    # A local: no candidate call can change it.
    expected_settle_ms = target.settle(lead_ms, timer.mark_settle, settle_figures)
    out = None
    k = len(sets)
    timer.start()
    issued = _monotonic()
    for index in sets:
        out = fn(input_sets[index])
        if kept is not None:
            kept.append(out)
    host_ms = (_monotonic() - issued) * 1000.0
    elapsed, busy_after = _region_end(target, timer)
    return Sample(elapsed / k, out, sets[-1], host_ms, busy_after, timer.settle_ms() - expected_settle_ms)


def _region_end(target: Target, timer: Timer) -> tuple[float, float]:
    """Ends a timed region: its time, and how long the device stayed busy after it (with the host's own path)."""
    timer.stop()
    elapsed = timer.elapsed_ms()
    waited = _monotonic()
    target.synchronize()  # work on other streams must finish before anyone reads the output
    sync_ms = (_monotonic() - waited) * 1000.0
    # Work left running shows in both: the device's gap after the region (which also holds the host's wake-up, long
    # where the host was preempted) and the host's wait in the synchronize (brief unless work was left running).
    return elapsed, min(timer.busy_after_ms(), sync_ms)


HOST_TAIL_REPEATS = 32


class Calibration(NamedTuple):
    host_tail_ms: float
    settle: dict[str, float]  # Target.calibrate's figures


def calibrate(target: Target) -> Calibration:
    """In the worker's trusted setup, before any candidate code exists (none can skew it): the target's own figures
    (Target.calibrate), and the host's own share of a region's busy-after figure (its wake-up, the synchronize, the
    closing event's launch, with nothing left running), an upper quartile over regions of one cache flush. It differs
    from process to process (11-60 us on an H100, steady within one: benchmarks/results/busy_before_split_h100.md):
    where base and head run in workers of their own, the parent takes each side's figures net of its own, and
    plans both sides' settles with the base's figures (evaluate.pair_driver), or the hidden-work check would
    compare two processes' hosts and measurements."""
    figures = target.calibrate()
    if target.kind == "cpu":
        return Calibration(0.0, figures)  # the host's clock is the device's: nothing runs after a region
    tails = []
    for _ in range(HOST_TAIL_REPEATS):
        timer = target.timer()
        target.synchronize()
        timer.start()
        target.flush_cache()  # device work of its own (no other stream): the host waits for it as for a sample's
        tails.append(_region_end(target, timer)[1])
    return Calibration(upper_quartile(tails), figures)
