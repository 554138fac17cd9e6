"""One timed sample on the device's own clock (`timed_sample`): the settle before it (Target.settle), `k` calls
between two device timestamps, and the region's end: how long the device stayed busy after it and how long the
settle took, the figures of the hidden-work check (wire.paired_times), each net of the work the process itself
put there (`host_tail`; Target.settle's expected work). The loops that pair samples are wire.timing's (one worker)
and evaluate.pair_driver's (base and head in workers of their own).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, NamedTuple

from kforge_bot.targets.base import Target, Timer

_monotonic = time.monotonic  # bound at import, before any candidate code exists


class Sample(NamedTuple):
    ms: float  # per call
    out: Any  # the last call's output
    index: int  # its input set
    host_ms: float  # the host's time to issue the calls
    # The device's work after the timed region's end (Timer.busy_after_ms, the host's sync), beyond the host's own
    # share of that figure measured right after (host_tail_ms).
    busy_after_ms: float
    # The settle before the region beyond its own expected work (Timer.settle_ms less what Target.settle returned):
    # whatever ran beside it. On an H100 two workers' flush counts for one lead differed by one (85 us) in a
    # quarter of split A/A decisions, and honest heads were rejected (benchmarks/results/gate_hidden_work_h100.md).
    busy_before_ms: float
    host_tail_ms: float = 0.0


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
    settle_beyond = timer.settle_ms() - expected_settle_ms
    tail = host_tail(target)
    return Sample(elapsed / k, out, sets[-1], host_ms, busy_after - tail, settle_beyond, tail)


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


def host_tail(target: Target) -> float:
    """The host's own share of a region's busy-after figure (its wake-up, the synchronize, the closing event's
    launch), measured right after a sample's region in the same process and state: a region of one cache flush
    with nothing else running (the sample's end synchronized the whole device). It differs from process to process
    (11-60 us on an H100: benchmarks/results/busy_before_split_h100.md) and drifts within one: measured once in a
    worker's setup it left honest split A/A heads 16-24 us "busier after" than their bases
    (benchmarks/results/gate_hidden_work_h100.md), against the check's 20 us floor."""
    if target.kind == "cpu":
        return 0.0  # the host's clock is the device's: nothing runs after a region
    timer = target.timer()
    timer.start()
    target.flush_cache()  # device work of its own (no other stream): the host waits for it as for a sample's
    return _region_end(target, timer)[1]
