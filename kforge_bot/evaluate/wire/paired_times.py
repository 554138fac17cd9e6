"""A paired timing's result (PairedTimes) and the one check made on the device's busy time it records
(check_no_hidden_work): what the worker's interleaved loop (evaluate.wire.timing.measure_pair) returns, and a check the
parent's loop over two workers (evaluate.pair_driver) makes on the same figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kforge_bot.evaluate.wire.checks import CheckFailure
from kforge_bot.evaluate.wire.graphs import GraphReplays


@dataclass
class PairedTimes:
    baseline_ms: list[float] = field(default_factory=list)
    candidate_ms: list[float] = field(default_factory=list)
    calls_per_sample: int = 1
    stop_reason: str = ""
    wall_s: float = 0.0
    # How the timed calls were issued: "eager" (each one launched), or "cuda_graph" (short kernels replayed from
    # captured graphs, no host overhead); results keep it under "mode" and "mode_note", as they always have.
    launch: str = "eager"
    launch_note: str = ""
    busy_after_ms: dict[str, float] = field(default_factory=dict)  # per side, Sample.busy_after_ms's upper quartile
    busy_before_ms: dict[str, float] = field(default_factory=dict)  # per side, Sample.busy_before_ms's
    # Per side, the warm-up's median time a call (after a 1 ms device lead, so a call whose host needs longer to
    # launch it than that lead stalls the device: about what a user calling it eagerly pays), the device's own time a
    # call (queued behind a lead longer than its launches: wire.timing's device estimate), and the host's time to
    # issue one.
    per_call_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    # Per side, the conditions its timed samples ran in (conditions.summarize): the parent judges them.
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The candidate as it was timed, where that was not its own function (graph replays): the checks after
    # timing must run the code that was timed. Not part of the report.
    timed_candidate: GraphReplays | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline_ms": self.baseline_ms,
            "candidate_ms": self.candidate_ms,
            "calls_per_sample": self.calls_per_sample,
            "mode": self.launch,
            "mode_note": self.launch_note,
            "stop_reason": self.stop_reason,
            "busy_after_ms": self.busy_after_ms,
            "busy_before_ms": self.busy_before_ms,
            "per_call_ms": self.per_call_ms,
            "conditions": self.conditions,
            "wall_s": self.wall_s,
        }


# Work a call runs on another stream outside the timed region escapes the timer's events. After the region: the
# device-wide synchronize after each sample waits for it, and the device's busy time after the region shows it.
# Before it: work started on a stream that does not wait for the current one runs beside the settle's cache flush
# (queued without a host wait, so the device leads the host), and stretches it. A side stream that waits for the
# current stream and is joined back (as cuDNN's grouped convolutions do: KernelBench L1 72 and 75) is timed and
# shows in neither. Upper quartiles, not medians: the speedup is a median of pair ratios, which work escaping in a
# minority of samples moves a little; escaping in more than a quarter of them shows here.
BUSY_FLOOR_MS = 0.02  # the host's timing differs this little between sides (quartiles over pairs)
BUSY_SHARE = 0.05  # ... or this share of the candidate's sample, where that is more


def check_no_hidden_work(busy_before_ms: dict[str, float], busy_after_ms: dict[str, float],
                         candidate_sample_ms: float) -> None:
    """Raises CheckFailure where the device was busy beside the settle before the candidate's samples, or after
    them, longer than beside or after the baseline's, by more than the host's jitter or BUSY_SHARE of the
    candidate's sample."""
    allowance = max(BUSY_FLOOR_MS, BUSY_SHARE * candidate_sample_ms)
    for when, busy, what in (
            ("after", busy_after_ms, "work left running outside the timed stream (a side stream not joined back to "
                                     "the current one) escapes the timer"),
            ("before", busy_before_ms, "work run beside the cache flush before the timed region (a side stream that "
                                       "does not wait for the current one) escapes the timer")):
        extra = busy.get("candidate", 0.0) - busy.get("baseline", 0.0)
        if extra > allowance:
            raise CheckFailure("rejected", f"the device was busy {extra * 1e3:.1f} us longer {when} the candidate's "
                                           f"timed samples than {when} the baseline's (upper quartiles; samples of "
                                           f"{candidate_sample_ms * 1e3:.1f} us): {what}")


def upper_quartile(values: list[float]) -> float:
    return sorted(values)[(3 * len(values)) // 4] if values else 0.0
