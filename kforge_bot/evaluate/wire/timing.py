"""Worker-side timing: baseline and candidate interleaved, on the device's own clock.

Each sample waits for the whole device, flushes the last-level cache (on a GPU: device-wide work of fixed
length, so every sample starts from the same state whichever side ran before; `Target.settle`), and times `k`
calls between two device timestamps (k > 1 only for kernels too short to time singly); where such short calls
are timed eagerly, the device is kept busy before the first timestamp for longer than the host takes to issue
the k calls (`settle(lead_ms)`), so the interval holds the device's work and not the host's launches. Samples
come in pairs whose order alternates (B C, C B, ...) so neither side always runs first. Input sets rotate, so no
call sees the inputs of the call before it. The loop stops once the speedup's confidence interval is tight enough or the
time budget is spent; the parent recomputes every statistic from the raw samples it receives. After each
sample the whole device is synchronized and the timer says how long it stayed busy after the timed region, and
how long the settle before it took: a candidate whose calls run work on another stream outside the region is
rejected (paired_times.check_no_hidden_work). Around every sample the worker reads the conditions it ran in
(wire.conditions: preemptions, CPU time, runnable tasks, threads, GPU clocks), which the parent judges; before every
eager sample the input sets it calls get fresh storage (`fresh_inputs`), so a memo of an earlier call's tensors finds
nothing. Where base and head each have a worker, the same schedule runs in the parent (evaluate.pair_driver) and each
worker times its own samples with these helpers (evaluate.worker.sample_server).
"""

from __future__ import annotations

import math
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import torch

from kforge_bot.evaluate.wire import conditions
from kforge_bot.evaluate.wire.checks import CheckFailure, poison_outputs, tolerance_for
from kforge_bot.evaluate.wire.graphs import GraphReplays, capture_graphs, tensors_of
from kforge_bot.evaluate.wire.paired_times import PairedTimes, check_no_hidden_work, upper_quartile
from kforge_bot.evaluate.wire.sample import timed_sample
from kforge_bot.evaluate.wire.stats import relative_half_width, speedup_from_pairs
from kforge_bot.targets.base import Target

MIN_SAMPLE_MS = 0.2  # shorter kernels are timed k calls at a time, so launch latency does not dominate
MAX_CALLS_PER_SAMPLE = 256
GRAPH_BELOW_MS = 1.0  # CUDA kernels shorter than this are replayed from graphs: launch overhead is >= ~1% of them
LEAD_FACTOR = 1.5  # the device's lead over a sample's calls, in multiples of the host's time to issue them
MIN_OVERRUN_S = 2.0  # the least time past the budget the loop waits for its minimum of pairs
LAUNCH_BOUND_SHARE = 0.8  # calls whose launches take this share of their device time or more are replayed from graphs

_monotonic = time.monotonic  # bound at import, before any candidate code exists
_randbits = secrets.randbits  # likewise: the positions RepeatCheck compares must not be the candidate's choice


def calls_per_sample_for(estimate_ms: float) -> int:
    if estimate_ms >= MIN_SAMPLE_MS:
        return 1
    return min(MAX_CALLS_PER_SAMPLE, math.ceil(MIN_SAMPLE_MS / max(estimate_ms, 1e-4)))


def slowest_median_ms(target: Target, fns: tuple[Callable[[list[Any]], Any], ...], input_sets: list[list[Any]],
                      afters: tuple[Callable[[Any, int], None], ...], calls: int = 5, lead_ms: float = 0.0) -> float:
    """The larger of the two sides' median time per call over a few untimed calls (outputs poisoned after
    each, as in the timed loop)."""
    return max(median_ms_per_side(target, fns, input_sets, afters, calls, lead_ms))


def median_ms_per_side(target: Target, fns: tuple[Callable[[list[Any]], Any], ...], input_sets: list[list[Any]],
                       afters: tuple[Callable[[Any, int], None], ...], calls: int = 5, lead_ms: float = 0.0,
                       heartbeat: Callable[[int], None] | None = None) -> list[float]:
    """Each side's median time per call over a few untimed calls, each after a device lead of `lead_ms`."""
    medians = []
    for fn, after in zip(fns, afters):
        times = []
        for i in range(calls):
            sample = timed_sample(target, fn, input_sets, sample_sets(i, 1, len(input_sets)), lead_ms)
            after(sample.out, sample.index)
            times.append(sample.ms)
            if heartbeat is not None:
                heartbeat(0)
        medians.append(sorted(times)[len(times) // 2])
    return medians


REPEAT_SAMPLE = 1 << 16  # elements of each output compared between timed calls on the same inputs


class RepeatCheck:
    """Every timed call's outputs against the first timed call's on the same input set, at REPEAT_SAMPLE positions
    drawn once per output from a secure source, within the output's dtype tolerance (exact for integers, NaN where
    NaN). Only some timed outputs reach the bot's comparison; a call that skipped its work, or did other work, in
    some samples (a kernel that could tell them apart) differs here. Base-class calls only: the outputs are the
    candidate's objects (anything but a plain tensor is refused by the caller's checks)."""

    def __init__(self, override: dict[str, float] | None = None) -> None:
        self._override = override
        self._seen: dict[tuple[int, int], tuple[int, Any, Any]] = {}  # (set, output) -> (numel, positions, values)

    def __call__(self, out: Any, index: int) -> None:
        for i, t in enumerate(tensors_of(out)):
            if type(t) is not torch.Tensor:
                continue
            flat = torch.Tensor.reshape(t, (-1,))
            numel = torch.Tensor.numel(flat)
            seen = self._seen.get((index, i))
            if seen is None:
                generator = torch.Generator().manual_seed(_randbits(63))
                positions = torch.randint(0, max(numel, 1), (min(numel, REPEAT_SAMPLE),), generator=generator)
                positions = positions.to(flat.device)
                self._seen[(index, i)] = (numel, positions, torch.Tensor.clone(flat[positions]))
                continue
            first_numel, positions, first = seen
            if numel != first_numel or not _close(flat[positions], first, self._override):
                raise CheckFailure("rejected", f"input set {index}, output {i}: a timed call's result differs from "
                                               "an earlier timed call's on the same inputs (work done in some "
                                               "calls only, or inputs changed by a call)")


def _close(now: Any, first: Any, override: dict[str, float] | None) -> bool:
    if not torch.is_floating_point(now) and not torch.is_complex(now):
        return bool(torch.equal(now, first))
    atol, rtol, _ = tolerance_for(now.dtype, override)
    wide = torch.complex128 if torch.is_complex(now) else torch.float64
    return bool(torch.allclose(now.to(wide), first.to(wide), rtol=rtol, atol=atol, equal_nan=True))


def sample_sets(pair: int, k: int, n: int) -> list[int]:
    """The input sets the samples of pair `pair` call, in order (k calls, n timed sets); with k = 1, those of
    untimed call number `pair` (warm-up, estimate). The one place the rotation is decided."""
    return [(pair * k + i) % n for i in range(k)]


def a_sample_holding(r: int, k: int, n: int) -> list[int]:
    """A sequence of input sets that timed samples replayed, holding set `r` as late as any did: replayed this
    way, a graph finds the device as it found it when timed (the sets before it already written), so a check
    cannot be told from a timed sample."""
    sequences = [sample_sets(pair, k, n) for pair in range(n)]
    return max((s for s in sequences if r in s), key=lambda s: s.index(r))


def _warm_up(target: Target, baseline: Callable[[list[Any]], Any], candidate: Callable[[list[Any]], Any],
             input_sets: list[list[Any]], warmup_ms: float, after_baseline: Callable[[Any, int], None],
             after_candidate: Callable[[Any, int], None],
             heartbeat: Callable[[int], None] | None,
             refresh: Callable[[str], None] | None = None) -> tuple[dict[str, float], dict[str, float]]:
    """Warm-up: compilation, caches, allocator pools. Returns, per side, the median time per call and the median
    host time to issue one call, both after the first two calls."""
    estimate: dict[str, float] = {}
    host_per_call: dict[str, float] = {}
    for fn, side in ((baseline, "b"), (candidate, "c")):
        # By side, not by function: an A/A run may pass one function for both.
        after = after_baseline if side == "b" else after_candidate
        estimate[side], host_per_call[side] = warm_up_side(target, fn, input_sets, warmup_ms, after, heartbeat,
                                                           None if refresh is None else (lambda s=side: refresh(s)))
    return estimate, host_per_call


def warm_up_side(target: Target, fn: Callable[[list[Any]], Any], input_sets: list[list[Any]], warmup_ms: float,
                 after: Callable[[Any, int], None], heartbeat: Callable[[int], None] | None,
                 refresh: Callable[[], None] | None = None) -> tuple[float, float]:
    """One side's warm-up (for at least `warmup_ms` and three calls): its median time per call and median host time
    to issue one, both after the first two calls (compilation, first-touch)."""
    calls = 0
    settled: list[float] = []
    issue: list[float] = []
    warm_start = _monotonic()
    while calls < 3 or (_monotonic() - warm_start) * 1000 < warmup_ms:
        sample = timed_sample(target, fn, input_sets, sample_sets(calls, 1, len(input_sets)))
        after(sample.out, sample.index)
        if refresh is not None:
            refresh()
        if heartbeat is not None:
            heartbeat(0)
        if calls >= 2:
            settled.append(sample.ms)
            issue.append(sample.host_ms)
        calls += 1
        if calls >= 1000:
            break
    # The median, not the maximum: one preempted warm-up call must not switch a 25 us kernel to k = 1.
    return sorted(settled)[len(settled) // 2], sorted(issue)[len(issue) // 2]


def _device_estimate(target: Target, fns: tuple[Callable[[list[Any]], Any], ...], input_sets: list[list[Any]],
                     afters: tuple[Callable[[Any, int], None], ...], lead_ms: float,
                     warm: dict[str, float], heartbeat: Callable[[int], None] | None) -> list[float]:
    """Each side's device time a call: on an asynchronous device, a few calls each queued behind a lead longer than
    the host needs to launch it, so the host's launches are out of the figure. The graph decision and the calls a
    sample are made from it: decided on the host-bound warm-up times, a model whose launches take about a
    millisecond was timed eagerly in some runs and replayed from graphs in others (KernelBench level 3's ResNet18)."""
    if target.kind != "cuda":
        return [warm["b"], warm["c"]]
    return median_ms_per_side(target, fns, input_sets, afters, lead_ms=lead_ms, heartbeat=heartbeat)


def launch_bound(per_call_ms: dict[str, dict[str, float]]) -> bool:
    """Whether either side's host needs about as long to launch a call as the device needs to run it, even behind
    a lead (LAUNCH_BOUND_SHARE of it or more). A lead covers only the launches a device's queue holds (about a
    thousand), so a call of more kernels runs at the host's pace whatever the lead, and its "device" estimate is the
    host's: KernelBench level 3's LSTMs and GRUs launch thousands of kernels a call (host 38-166 ms, device
    estimates 24-134 ms), and timed eagerly their A/A intervals reached +-4.5%. Calls the lead does cover launch in
    well under their device time (device-bound level-3 models: 0.05-0.8 of it)."""
    return any(side["host_issue"] >= LAUNCH_BOUND_SHARE * side["device"] for side in per_call_ms.values())


def _replay_if_short(result: PairedTimes, target: Target, estimate: float,
                     fns: tuple[Callable[[list[Any]], Any], ...], input_sets: list[list[Any]],
                     afters: tuple[Callable[[Any, int], None], ...]) -> tuple[Callable[[list[Any]], Any], ...]:
    """The graph decision: (baseline, candidate) as they will be timed, eager or replayed from CUDA graphs, with
    `result`'s launch, note and calls per sample set to match. Replayed: calls shorter than GRAPH_BELOW_MS of the
    device, and calls whose launches outlast their device work (`launch_bound`); the warm-up's eager figures are
    kept beside the timed ones for the note a user calling them eagerly needs."""
    if target.kind != "cuda" or not (estimate < GRAPH_BELOW_MS or launch_bound(result.per_call_ms)):
        return fns
    # A short kernel timed eagerly measures the host's launch overhead as much as the kernel. Replaying
    # captured graphs puts the calls back to back on the device; if either side cannot be captured
    # (host syncs, CPU work), both stay eager so the comparison stays like for like.
    captured = capture_graphs(target, fns, input_sets)
    if isinstance(captured, str):
        result.launch_note = f"eager: graph capture failed ({captured})"
        return fns
    (baseline, candidate), result.launch_note = captured
    result.launch = "cuda_graph"
    # The eager estimate was the host's launch time as much as the kernel's (25-100 us for one 25 us
    # kernel on the H200, from run to run): how many calls make a sample is decided from replays, so
    # every sample holds at least MIN_SAMPLE_MS of device work whatever the host did during warm-up.
    replayed = slowest_median_ms(target, (baseline, candidate), input_sets, afters)
    # At most one replay of each input set's graph a sample: every output is poisoned between samples, and a
    # second replay of a graph within one sample would find the first one's answer in its output (or the same
    # inputs' answer in another graph's) and could return it without the work.
    result.calls_per_sample = min(calls_per_sample_for(replayed), len(input_sets))
    for side in (baseline, candidate):
        if isinstance(side, GraphReplays):
            side.poison_outputs()  # the first sample starts from poison too
    result.timed_candidate = candidate if isinstance(candidate, GraphReplays) else None
    return baseline, candidate


def stop_reason(pair: int, now: float, budget_end: float, timing_budget_s: float, min_pairs: int,
                max_pairs: int) -> str:
    """Why the loop stops after `pair` pairs (the budget, the pair limit), or "" to go on."""
    if pair >= max_pairs:
        return f"reached {max_pairs} pairs"
    if now >= budget_end and pair >= min_pairs:
        return f"time budget of {timing_budget_s:g} s spent"
    # min_pairs of a very slow kernel: stop anyway (never sooner than MIN_OVERRUN_S past the budget, so a loaded host
    # that stretches a short budget's samples still gets its minimum)
    if now >= budget_end + max(4 * timing_budget_s, MIN_OVERRUN_S):
        return "time budget far exceeded before the minimum number of pairs"
    return ""


_Call = Callable[[list[Any]], Any]  # one call of a side on one input set
_After = Callable[[Any, int], None]  # a callback on an output and its input set's index
_Progress = Callable[[int, float | None, tuple[float, float] | None], None]


def measure_pair(target: Target, baseline: _Call, candidate: _Call, input_sets: list[list[Any]], *,
                 timing_budget_s: float, target_precision: float, min_pairs: int, max_pairs: int, confidence: float,
                 warmup_ms: float, after_baseline: _After, after_candidate: _After,
                 progress: _Progress | None = None, heartbeat: Callable[[int], None] | None = None,
                 tolerance: dict[str, float] | None = None, after_candidate_sample: Callable[[], None] | None = None,
                 refresh: Callable[[str], None] | None = None,
                 fresh_inputs: Callable[[list[int]], None] | None = None) -> PairedTimes:
    """Interleaved A/B timing until the CI is tight, the budget is spent, or `max_pairs` is reached.

    `heartbeat(pairs)` runs after every call of the warm-up and every pair (the caller throttles it).
    `after_baseline(out, input_index)` (a sample's last output) and `after_candidate(out, input_index)` (every
    call's output of a sample, each first checked against the first timed call's on its inputs: RepeatCheck) run
    outside the timed region: the caller poisons both sides' outputs (so a candidate cannot find the baseline's in
    freed memory, and a replayed graph that leaves its output unwritten shows) and keeps the candidate's timed
    outputs for the correctness check. `tolerance`: the spec's, for RepeatCheck. `after_candidate_sample()` runs
    once after each of the candidate's samples, before its outputs' callbacks (the caller's per-sample checks: a
    patched clock or harness function found before the next sample could use it).
    `refresh(side)` ("b" or "c"), where given, runs after each sample and its callbacks, outside the timed region:
    it puts back what the calls consumed (in-place inputs restored, a backward's graphs built again). Each input set
    is then called at most once a sample, eagerly (a replayed graph would not see the refreshed state).
    `fresh_inputs(sets)`, where given, runs before every eager timed sample, outside the timed region: the input sets
    the sample calls get storage of their own, so no call is answered from a memo of an earlier one's tensors.
    Every sample's conditions are read around it (conditions.Gauge) and summarised per side in the result.
    """
    started = _monotonic()
    sample_done = after_candidate_sample or (lambda: None)

    def after_single_call(out: Any, index: int) -> None:  # warm-up and estimate: every call is a sample
        sample_done()
        after_candidate(out, index)

    result, (baseline, candidate), lead = _prepare(target, (baseline, candidate), input_sets, warmup_ms,
                                                   (after_baseline, after_single_call), heartbeat, refresh)
    # The budget is the timed pairs': the warm-up, the estimates and the graph captures before them are the
    # harness's own cost (with the leads of a model of many launches, seconds: level 3's bidirectional GRU got
    # one pair of a 2 s budget when they counted).
    budget_end = _monotonic() + timing_budget_s
    repeats = RepeatCheck(tolerance)
    gauge = conditions.Gauge(conditions.NvmlClocks.open(target.kind, getattr(target, "index", 0)),
                             waits=target.kind == "cpu")
    loop = PairLoop(target, {"b": baseline, "c": candidate}, input_sets, result, lead,
                    StopRule(timing_budget_s, target_precision, min_pairs, max_pairs, confidence, budget_end),
                    repeats, gauge, after_baseline, after_candidate, sample_done, heartbeat, progress, refresh,
                    # a replayed graph runs no code a memo could live in
                    fresh_inputs if result.launch == "eager" else None)
    loop.run()
    loop.finish()
    result.wall_s = _monotonic() - started
    return result


def _prepare(target: Target, fns: tuple[_Call, _Call], input_sets: list[list[Any]], warmup_ms: float,
             afters: tuple[_After, _After], heartbeat: Callable[[int], None] | None,
             refresh: Callable[[str], None] | None) -> tuple[PairedTimes, tuple[_Call, _Call], dict[str, float]]:
    """Everything before the timed pairs: the warm-up, each side's device time a call and the graph decision. Returns
    the result with its calls per sample, launch and per-call figures set, the sides as they will be timed, and each
    side's device lead."""
    warm, host_per_call = _warm_up(target, fns[0], fns[1], input_sets, warmup_ms, afters[0], afters[1], heartbeat,
                                   refresh)
    # One lead for both sides (the longer host): each sample's settle is then the same work, so a settle stretched by
    # work the candidate ran beside it shows (check_no_hidden_work), and no side sets its own window.
    longest = max(host_per_call.values(), default=0.0)
    # With a refresh, every call consumes what the refresh puts back: no extra estimate calls, the warm-up's figures.
    device = [warm["b"], warm["c"]] if refresh is not None else \
        _device_estimate(target, fns, input_sets, afters, LEAD_FACTOR * longest, warm, heartbeat)
    result = PairedTimes(calls_per_sample=calls_per_sample_for(max(device)))
    result.per_call_ms = {name: {"eager": warm[side], "device": dev, "host_issue": host_per_call[side]}
                          for name, side, dev in (("baseline", "b", device[0]), ("candidate", "c", device[1]))}
    if refresh is None:
        baseline, candidate = _replay_if_short(result, target, max(device), fns, input_sets, afters)
    else:
        baseline, candidate = fns
        result.calls_per_sample = min(result.calls_per_sample, len(input_sets))
        result.launch_note = "eager: each call's inputs or graph are put back between samples, outside the timed region"
    k = result.calls_per_sample
    # Calls timed eagerly: each sample's device lead covers the host's time to issue its k calls (measured in the
    # warm-up, per side), so the device runs them back to back and the interval times them, not the host's
    # launches. (With only the fixed ~50 us spin, on the H200 a one-kernel load_inline candidate timed 39.8 us a
    # call eagerly against 17.4 us in KernelBench's single-call loop; a whole model whose launches take longer than
    # the settle, KernelBench level 3's ResNet18, left the device waiting on the host and read 1.5% apart in A/A.)
    # Fixed for the run, not fed back: a call that synchronizes the host would otherwise grow its own lead every
    # sample.
    lead = {side: (LEAD_FACTOR * longest * k if result.launch == "eager" else 0.0) for side in host_per_call}
    return result, (baseline, candidate), lead


class StopRule(NamedTuple):
    """When measure_pair's loop stops (PairLoop.stop_reason): its arguments, and the time its budget ends."""
    timing_budget_s: float
    target_precision: float
    min_pairs: int
    max_pairs: int
    confidence: float
    budget_end: float


@dataclass
class PairLoop:
    """measure_pair's timed pairs: the sides as timed (by side, not by function: an A/A run may pass one function
    for both), its callbacks (measure_pair's, `sample_done` its after_candidate_sample), and what each side's samples
    gathered. Its steps, in the order the loop takes them: `sample` (one side's), `check_candidate` and `poison` (its
    outputs), `stop_reason` (after each pair), `finish` (the result's per-side summaries, the hidden-work check)."""
    target: Target
    fns: dict[str, _Call]
    input_sets: list[list[Any]]
    result: PairedTimes
    lead: dict[str, float]
    rule: StopRule
    repeats: RepeatCheck
    gauge: conditions.Gauge
    after_baseline: _After
    after_candidate: _After
    sample_done: Callable[[], None]
    heartbeat: Callable[[int], None] | None
    progress: _Progress | None
    refresh: Callable[[str], None] | None
    fresh: Callable[[list[int]], None] | None
    busy_after: dict[str, list[float]] = field(default_factory=lambda: {"b": [], "c": []})
    busy_before: dict[str, list[float]] = field(default_factory=lambda: {"b": [], "c": []})
    readings: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"b": [], "c": []})

    def run(self) -> None:
        """Pairs, B C then C B and so on, until `stop_reason` gives one (set on the result)."""
        pair = 0
        while not self.result.stop_reason:
            for side in ("b", "c") if pair % 2 == 0 else ("c", "b"):
                self.sample(pair, side)
            pair += 1
            if self.heartbeat is not None:
                self.heartbeat(pair)  # the parent's no-progress limit counts from the last message
            self.result.stop_reason = self.stop_reason(pair)

    def sample(self, pair: int, side: str) -> None:
        """One side's timed sample of pair `pair`, then, outside the timed region, its callbacks, the poisoning of
        its outputs and the refresh."""
        fn = self.fns[side]
        # Every call's output stays allocated until the sample is over and is then poisoned (the last one by the
        # callbacks): freed as the next call began, the baseline's earlier answers lay in memory the candidate's
        # next outputs could be given. Both sides alike, so their memory traffic matches.
        outs: list[Any] = []
        calls = sample_sets(pair, self.result.calls_per_sample, len(self.input_sets))
        if self.fresh is not None:
            self.fresh(sorted(set(calls)))
        self.gauge.begin()
        sample = timed_sample(self.target, fn, self.input_sets, calls, self.lead[side], outs)
        self.readings[side].append(self.gauge.take())
        self.busy_after[side].append(sample.busy_after_ms)
        self.busy_before[side].append(sample.busy_before_ms)
        if side == "b":
            self.result.baseline_ms.append(sample.ms)
            self.after_baseline(sample.out, sample.index)
        else:
            self.result.candidate_ms.append(sample.ms)
            self.check_candidate(fn, calls, outs)
        self.poison(fn, side, outs)
        del outs, sample
        if self.refresh is not None:
            self.refresh(side)

    def check_candidate(self, fn: _Call, calls: list[int], outs: list[Any]) -> None:
        """The candidate's per-sample checks, then every call of the sample, not only the last: each is checked
        against the first timed call on its inputs, and what is kept for the bot's comparison comes from timed
        calls only."""
        self.sample_done()
        if isinstance(fn, GraphReplays):  # a replayed graph's outputs are its last replay's
            calls = sorted(set(calls))
            outs = [fn.output(self.input_sets[j]) for j in calls]
        for j, o in zip(calls, outs):
            self.repeats(o, j)
            self.after_candidate(o, j)

    @staticmethod
    def poison(fn: _Call, side: str, outs: list[Any]) -> None:
        if isinstance(fn, GraphReplays):
            fn.poison_outputs()  # every graph's, not only the last call's: no sample starts with an answer
        elif side == "b":
            poison_outputs(outs[:-1])  # the candidate's were poisoned by its callback, one by one

    def stop_reason(self, pair: int) -> str:
        """Why the loop stops after `pair` pairs (the interval is tight enough, else `stop_reason`'s), or ""."""
        rule = self.rule
        now = _monotonic()
        if pair >= rule.min_pairs and (pair % 5 == 0 or pair >= rule.max_pairs or now >= rule.budget_end):
            speedup, ci = speedup_from_pairs(self.result.baseline_ms, self.result.candidate_ms, rule.confidence)
            if self.progress is not None:
                self.progress(pair, speedup, ci)
            if relative_half_width(ci, speedup) <= rule.target_precision:
                return f"confidence interval within +-{rule.target_precision:.1%}"
        return stop_reason(pair, now, rule.budget_end, rule.timing_budget_s, rule.min_pairs, rule.max_pairs)

    def finish(self) -> None:
        """Each side's conditions and busy times summarised in the result; raises CheckFailure where the candidate
        hid work from the timer (check_no_hidden_work)."""
        result = self.result
        result.conditions = {"baseline": conditions.summarize(self.readings["b"]),
                             "candidate": conditions.summarize(self.readings["c"])}
        result.busy_after_ms = {"baseline": upper_quartile(self.busy_after["b"]),
                                "candidate": upper_quartile(self.busy_after["c"])}
        result.busy_before_ms = {"baseline": upper_quartile(self.busy_before["b"]),
                                 "candidate": upper_quartile(self.busy_before["c"])}
        check_no_hidden_work(result.busy_before_ms, result.busy_after_ms,
                             upper_quartile(result.candidate_ms) * result.calls_per_sample)
