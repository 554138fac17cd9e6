"""The worker's timing loop (evaluate.wire.timing) against a stand-in device: how a sample is made up."""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from kforge_bot.evaluate.wire import graphs, paired_times, sample, timing
from kforge_bot.evaluate.wire.checks import CheckFailure
from kforge_bot.targets.base import HostTimer, Target, Timer


class LaunchBoundTarget(Target):
    """A 'cuda' device as the timing loop sees it, run on the host clock: no cache to flush, nothing to wait for."""

    kind = "cuda"

    @classmethod
    def available(cls) -> bool:
        return True

    def device_name(self) -> str:
        return "stand-in"

    def timer(self) -> Timer:
        return HostTimer()

    def flush_cache(self) -> None:
        pass

    def synchronize(self) -> None:
        pass


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _measure(monkeypatch: pytest.MonkeyPatch, replay_s: float) -> paired_times.PairedTimes:
    # Eager calls cost 10 ms of "launch" each (at least a sample's worth, so eager timing would take one call a
    # sample); their captured graphs replay in `replay_s`. The thresholds are scaled up so that a loaded CPU
    # (busy-waits only ever last longer) cannot change which way the test goes.
    monkeypatch.setattr(timing, "MIN_SAMPLE_MS", 5.0)
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 1e9)

    def eager(inputs: list[Any]) -> list[Any]:
        _busy(0.010)
        return []

    def replay(inputs: list[Any]) -> list[Any]:
        _busy(replay_s)
        return []

    monkeypatch.setattr(timing, "capture_graphs", lambda target, fns, sets: ((replay, replay), ""))
    return timing.measure_pair(LaunchBoundTarget(), eager, eager, [[1], [2], [3]], timing_budget_s=0.2,
                               target_precision=0.5, min_pairs=5, max_pairs=10, confidence=0.95, warmup_ms=5,
                               after_baseline=lambda out, i: None, after_candidate=lambda out, i: None)


def test_calls_per_sample_follow_the_replays_not_the_eager_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 25 us kernel whose eager launch took ~70 us on the H200 got 3 calls a sample instead of 8 (0.2 ms of
    device work): noisier samples, a 1% slowdown missed in 2 of 5 runs. The count now comes from replays."""
    result = _measure(monkeypatch, replay_s=0.0002)
    assert result.launch == "cuda_graph"
    eager_k = timing.calls_per_sample_for(10.0)  # what the eager warm-up alone would have chosen
    assert eager_k == 1 and result.calls_per_sample > eager_k


def test_a_replay_that_is_long_enough_alone_is_timed_one_call_a_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _measure(monkeypatch, replay_s=0.006)  # over the (scaled) 5 ms a sample
    assert result.launch == "cuda_graph" and result.calls_per_sample == 1


def test_calls_per_sample_bounds() -> None:
    assert timing.calls_per_sample_for(timing.MIN_SAMPLE_MS) == 1
    assert timing.calls_per_sample_for(timing.MIN_SAMPLE_MS / 8) == 8
    assert timing.calls_per_sample_for(0.0) == timing.MAX_CALLS_PER_SAMPLE


class LeadRecordingTarget(LaunchBoundTarget):
    leads: list[float] = []

    def settle(self, lead_ms: float = 0.0, mark: Any = None, figures: Any = None) -> float:
        LeadRecordingTarget.leads.append(lead_ms)
        return 0.0


# The calls per sample (k >= 2 for these 1 ms calls) come from the median of the warm-up's calls after the first
# two: with 1-5 ms of warm-up that was one or two calls, and one preempted call on a loaded 2-core host made k = 1.
# 60 ms of warm-up gives dozens, whose median a few preemptions do not move; and a sample of at least 200 ms keeps
# k >= 2 while a 1 ms busy-wait takes under 100 ms of wall time (beside two busy loops it took 20-60 ms: 20 ms
# samples then held one call).
WARM_MS = 60
SAMPLE_MS = 200.0
# Work left running after the region (or beside the settle before it), over 5% of even a preempted sample (the allowance grows with the sample, which
# a loaded host stretches): 0.5 ms went unseen beside two busy loops.
HIDDEN_MS = 10.0

def test_each_samples_device_lead_covers_the_hosts_time_to_issue_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eagerly timed short calls: the device must not catch up with the host mid-sample, or the sample times
    the launches (on the H200 a one-kernel candidate timed 39.8 us a call eagerly, 17.4 us as a single call).
    Each sample asks for a lead of at least the host's issue time of that side's calls (from the warm-up)."""
    monkeypatch.setattr(timing, "MIN_SAMPLE_MS", SAMPLE_MS)  # 1 ms calls: k >= 2 a sample, even loaded
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.0)  # eager, as when a capture fails
    monkeypatch.setattr(timing, "LAUNCH_BOUND_SHARE", float("inf"))
    LeadRecordingTarget.leads = []

    def launch_bound(inputs: list[Any]) -> list[Any]:
        _busy(0.001)
        return []

    result = timing.measure_pair(LeadRecordingTarget(), launch_bound, launch_bound, [[1], [2], [3]],
                                 timing_budget_s=0.1, target_precision=0.5, min_pairs=5, max_pairs=8,
                                 confidence=0.95, warmup_ms=WARM_MS, after_baseline=lambda out, i: None,
                                 after_candidate=lambda out, i: None)
    k = result.calls_per_sample
    assert result.launch == "eager" and k >= 2
    timed_leads = LeadRecordingTarget.leads[-2 * len(result.baseline_ms):]
    # Busy-waits only ever last longer, so each sample's k calls took >= k ms of the host: so must its lead.
    assert all(lead >= k * 1.0 for lead in timed_leads), (k, timed_leads)


def test_the_per_sample_checks_run_once_a_candidate_sample_and_each_timed_call_is_still_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The guards' snapshot check between samples is the caller's slowest callback: run once per call of an eager
    sample of k short calls, it cut the pairs a budget holds. Once per candidate sample (warm-up calls are samples
    of one); the per-call callback still sees every timed call."""
    monkeypatch.setattr(timing, "MIN_SAMPLE_MS", SAMPLE_MS)
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.0)
    monkeypatch.setattr(timing, "LAUNCH_BOUND_SHARE", float("inf"))
    samples, calls = [0], [0]

    def launch_bound(inputs: list[Any]) -> list[Any]:
        _busy(0.001)
        return []

    def count_call(out: Any, index: int) -> None:
        calls[0] += 1

    def count_sample() -> None:
        samples[0] += 1

    # A budget the 4 pairs fit in on a loaded host (past 5x it the loop stops short of its minimum).
    result = timing.measure_pair(LaunchBoundTarget(), launch_bound, launch_bound, [[1], [2], [3]],
                                 timing_budget_s=2.0, target_precision=0.0, min_pairs=4, max_pairs=4,
                                 confidence=0.95, warmup_ms=WARM_MS, after_baseline=lambda out, i: None,
                                 after_candidate=count_call, after_candidate_sample=count_sample)
    k, timed = result.calls_per_sample, len(result.candidate_ms)
    assert k >= 2 and timed == 4
    untimed = samples[0] - timed  # warm-up calls, one a sample
    assert untimed >= 3 and calls[0] == untimed + timed * k


class OrderRecordingTarget(LaunchBoundTarget):
    """Records what the timing loop asks of the device, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def settle(self, lead_ms: float = 0.0, mark: Any = None, figures: Any = None) -> float:
        self.calls.append("settle")
        return 0.0

    def synchronize(self) -> None:
        self.calls.append("synchronize")

    def timer(self) -> Timer:
        calls = self.calls

        class Recording(HostTimer):
            def start(self) -> None:
                calls.append("start")
                super().start()

        return Recording()


def test_every_sample_starts_right_after_the_device_settles_whichever_side_ran_before() -> None:
    """What the GPU did just before a sample moves its time (H200: a compiled LayerNorm 0.32 ms back to back,
    0.52-0.57 ms after 8 ms of low activity; benchmarks/results/agreement_h200.md). So every sample, baseline's
    and candidate's alike, begins with the target's settle (device-wide work of fixed length on a GPU) and
    nothing between it and the start of the timed region: no host wait that would let the device idle."""
    target = OrderRecordingTarget()
    calls = target.calls

    def fn(inputs: list[Any]) -> list[Any]:
        calls.append("call")
        return []

    result = timing.measure_pair(target, fn, fn, [[1], [2]], timing_budget_s=0.05, target_precision=0.5,
                                 min_pairs=4, max_pairs=4, confidence=0.95, warmup_ms=1,
                                 after_baseline=lambda out, i: None, after_candidate=lambda out, i: None)
    samples = 2 * len(result.baseline_ms)
    # Regions of calls; the others time the host's own tail after a sample (a flush: wire.sample.host_tail).
    starts = [i for i, c in enumerate(calls) if c == "start" and calls[i + 1] == "call"]
    assert len(starts) >= samples
    assert all(calls[i - 1] == "settle" for i in starts), calls


def test_why_the_loop_stops() -> None:
    """The pair limit first; the budget only once the minimum pairs are in, unless it is far exceeded."""
    end = 100.0  # the budget (10 s) ends at t = 100
    assert timing.stop_reason(8, 50.0, end, 10.0, min_pairs=5, max_pairs=8) == "reached 8 pairs"
    assert timing.stop_reason(5, 100.0, end, 10.0, min_pairs=5, max_pairs=8) == "time budget of 10 s spent"
    assert timing.stop_reason(3, 120.0, end, 10.0, min_pairs=5, max_pairs=8) == ""
    assert timing.stop_reason(3, 140.0, end, 10.0, min_pairs=5, max_pairs=8) == \
        "time budget far exceeded before the minimum number of pairs"
    assert timing.stop_reason(6, 50.0, end, 10.0, min_pairs=5, max_pairs=8) == ""


def test_a_short_kernel_off_cuda_is_timed_eagerly() -> None:
    class CpuLike(LaunchBoundTarget):
        kind = "cpu"

    def fn(inputs: list[Any]) -> list[Any]:
        return []

    result = paired_times.PairedTimes()
    assert timing._replay_if_short(result, CpuLike(), 0.001, (fn, fn), [[1]], (print, print)) == (fn, fn)
    assert (result.launch, result.launch_note) == ("eager", "")


class _RecordingGraph:
    """A stand-in CUDA graph on the host: each replay notes whether its static output already held an answer
    (not poison) before it wrote, as a kernel that returns early when it finds one would see it."""

    def __init__(self, inputs: list[Any], out: Any, found: list[bool]) -> None:
        self.inputs, self.out, self.found = inputs, out, found

    def replay(self) -> None:
        self.found.append(not bool(self.out.isnan().all()))
        self.out.copy_(self.inputs[0] * 2.0 + 1.0)


def test_every_timed_replay_starts_from_a_poisoned_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph writes the same memory at every replay. Poisoning only the sample's last output (as eager timing
    does) left the other input sets' answers in place, so a kernel that returns early when its output already
    holds a value was timed doing nothing on most replays. Every graph's outputs are poisoned after every
    sample, and no graph replays twice in one sample."""
    import torch

    monkeypatch.setattr(timing, "MIN_SAMPLE_MS", 50.0)  # would ask for many calls a sample
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 1e9)
    sets = [[torch.full((8,), float(i))] for i in range(3)]
    found: dict[str, list[bool]] = {"b": [], "c": []}

    def side_graphs(side: str) -> graphs.GraphReplays:
        made = {}
        for inputs in sets:
            out = torch.empty(8)
            made[id(inputs)] = (_RecordingGraph(inputs, out, found[side]), out)
        return graphs.GraphReplays(made)

    monkeypatch.setattr(timing, "capture_graphs", lambda target, fns, s: ((side_graphs("b"), side_graphs("c")), ""))

    def eager(inputs: list[Any]) -> Any:
        return inputs[0] * 2.0 + 1.0

    def poison_last(out: Any, index: int) -> None:  # what the harness's callbacks do: the last output only
        out.fill_(float("nan"))

    result = timing.measure_pair(LaunchBoundTarget(), eager, eager, sets, timing_budget_s=0.05, target_precision=0.0,
                                 min_pairs=6, max_pairs=6, confidence=0.95, warmup_ms=1,
                                 after_baseline=poison_last, after_candidate=poison_last)
    assert result.launch == "cuda_graph"
    assert result.calls_per_sample <= len(sets)  # one replay of each set's graph a sample, at most
    timed = result.calls_per_sample * len(result.candidate_ms)
    for side in ("b", "c"):
        assert found[side][-timed:] == [False] * timed, (side, found[side][-timed:])
    assert isinstance(result.timed_candidate, graphs.GraphReplays)  # the checks after timing replay it


class _SometimesIdleGraph(_RecordingGraph):
    """Does its work on every other replay only, as a kernel that can tell some timed samples from others would."""

    def replay(self) -> None:
        self.found.append(True)
        if len(self.found) % 2:
            self.out.copy_(self.inputs[0] * 2.0 + 1.0)


def test_a_graph_idle_in_some_timed_samples_is_refused_and_every_set_kept_comes_from_a_timed_replay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the checks after timing replaying each graph alone, a kernel that could tell a timed sample (where the
    other sets' graphs ran first) from a check could skip its work in timed samples only; and the outputs kept for
    the comparison were the last call's of each sample, so the other sets' came from untimed replays. Each
    replayed set's outputs are now checked against its first timed sample's after every sample, and kept."""
    import torch

    from kforge_bot.evaluate.wire.checks import CheckFailure

    monkeypatch.setattr(timing, "MIN_SAMPLE_MS", 50.0)
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 1e9)
    sets = [[torch.full((8,), float(i))] for i in range(3)]

    def replays(graph_class: type) -> graphs.GraphReplays:
        made, found = {}, []
        for inputs in sets:
            out = torch.empty(8)
            made[id(inputs)] = (graph_class(inputs, out, found), out)
        return graphs.GraphReplays(made)

    def eager(inputs: list[Any]) -> Any:
        return inputs[0] * 2.0 + 1.0

    kept: list[int] = []

    def measure(candidate_graph: type) -> paired_times.PairedTimes:
        monkeypatch.setattr(timing, "capture_graphs",
                            lambda target, fns, s: ((replays(_RecordingGraph), replays(candidate_graph)), ""))
        return timing.measure_pair(LaunchBoundTarget(), eager, eager, sets, timing_budget_s=0.05, target_precision=0.0,
                                   min_pairs=6, max_pairs=6, confidence=0.95, warmup_ms=1,
                                   after_baseline=lambda out, i: None, after_candidate=lambda out, i: kept.append(i))

    honest = measure(_RecordingGraph)
    timed_calls = len(honest.candidate_ms) * len(sets)
    assert sorted(kept[-timed_calls:]) == sorted(list(range(len(sets))) * len(honest.candidate_ms))
    with pytest.raises(CheckFailure, match="differs from an earlier timed call"):
        measure(_SometimesIdleGraph)


def test_every_output_of_an_eager_sample_of_several_calls_is_poisoned_before_it_is_freed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Short kernels timed eagerly k calls a sample: each call's output was freed as the next one began, so the
    baseline's answers lay unpoisoned in memory the candidate's next outputs could be given (a candidate checking a
    sample of that memory could return it without the work). Each output now lives until the sample is over and is
    poisoned then."""
    import torch

    monkeypatch.setattr(timing, "MIN_SAMPLE_MS", SAMPLE_MS)  # 1 ms calls: several a sample
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.0)  # eager, as when a capture fails
    monkeypatch.setattr(timing, "LAUNCH_BOUND_SHARE", float("inf"))
    made: list[torch.Tensor] = []

    def baseline(inputs: list[Any]) -> torch.Tensor:
        _busy(0.001)
        made.append(inputs[0] * 2.0 + 1.0)
        return made[-1]

    def candidate(inputs: list[Any]) -> torch.Tensor:
        _busy(0.001)
        return inputs[0] * 2.0 + 1.0

    def poison(out: Any, index: int) -> None:  # what the harness's callbacks do to the last output
        out.fill_(float("nan"))

    sets = [[torch.full((8,), float(i))] for i in range(3)]
    result = timing.measure_pair(LaunchBoundTarget(), baseline, candidate, sets, timing_budget_s=0.05,
                                 target_precision=0.0, min_pairs=4, max_pairs=4, confidence=0.95, warmup_ms=1,
                                 after_baseline=poison, after_candidate=poison)
    k = result.calls_per_sample
    assert result.launch == "eager" and k >= 2
    timed = made[-k * len(result.baseline_ms):]
    assert all(bool(t.isnan().all()) for t in timed)


@pytest.mark.parametrize("k,n", [(3, 3), (2, 3), (1, 3), (2, 4), (3, 5)])
def test_a_check_replays_a_sequence_timing_used_with_the_set_as_late_as_it_came(k: int, n: int) -> None:
    """The checks after timing replay the graphs as a timed sample did, so a graph that could tell a check from a
    timed sample (by the outputs of the graphs replayed before it) is checked where it was timed."""
    used = [timing.sample_sets(pair, k, n) for pair in range(10 * n)]
    for r in range(n):
        sequence = timing.a_sample_holding(r, k, n)
        assert sequence in used and r in sequence
        assert sequence.index(r) == max(s.index(r) for s in used if r in s)


def test_an_eager_candidate_idle_in_some_calls_of_a_sample_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short kernels timed eagerly k calls a sample (a capture made to fail): only the last call's output was
    checked, so a candidate doing its work on every k-th call read k times faster with every checked output
    right. Every call's output is now checked against the first timed call's on the same inputs."""
    import torch

    from kforge_bot.evaluate.wire.checks import CheckFailure

    monkeypatch.setattr(timing, "MIN_SAMPLE_MS", SAMPLE_MS)
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.0)
    monkeypatch.setattr(timing, "LAUNCH_BOUND_SHARE", float("inf"))
    calls = [0]

    def honest(inputs: list[Any]) -> torch.Tensor:
        _busy(0.001)
        return inputs[0] * 2.0 + 1.0

    def sometimes(inputs: list[Any]) -> torch.Tensor:
        calls[0] += 1
        if calls[0] % 2:  # every other call, so each input set gets both (a set never worked on fails the bot)
            return torch.full_like(inputs[0], float("nan"))  # no work: what freed, poisoned memory holds
        return honest(inputs)

    sets = [[torch.full((8,), float(i))] for i in range(3)]
    kwargs = dict(timing_budget_s=0.05, target_precision=0.0, min_pairs=4, max_pairs=4, confidence=0.95, warmup_ms=WARM_MS,
                  after_baseline=lambda out, i: None, after_candidate=lambda out, i: None)
    assert timing.measure_pair(LaunchBoundTarget(), honest, honest, sets, **kwargs).calls_per_sample >= 2
    with pytest.raises(CheckFailure, match="differs from an earlier timed call"):
        timing.measure_pair(LaunchBoundTarget(), honest, sometimes, sets, **kwargs)


class HiddenWorkTarget(LaunchBoundTarget):
    """A device on which the candidate's calls run `hidden_ms` of work on another stream outside the timed region:
    "after" it (left running: the synchronize after the sample waits for it, the timer's gap shows it) or "before"
    it (beside the settle's cache flush, which it stretches). The baseline's calls run none."""

    def __init__(self, hidden_ms: float, when: str, every: int = 1) -> None:
        super().__init__()
        self.hidden_ms, self.when, self.every = hidden_ms, when, every
        self.side = "b"
        self.samples = 0

    def settle(self, lead_ms: float = 0.0, mark: Any = None, figures: Any = None) -> float:
        self.samples += 1
        return 0.0

    def _hidden(self, when: str) -> float:
        hiding = self.side == "c" and self.when == when and self.samples % self.every == 0
        return self.hidden_ms if hiding else 0.0

    left_ms = ran_ms = 0.0  # work the last call left running; what the last synchronize waited for

    def synchronize(self) -> None:
        self.ran_ms, self.left_ms = self.left_ms, 0.0
        _busy(self.ran_ms / 1000.0)

    def timer(self) -> Timer:
        target = self

        class Busy(HostTimer):
            def settle_ms(self) -> float:
                return 1.0 + target._hidden("before")  # the flush's fixed 1 ms, stretched by work beside it

            def busy_after_ms(self) -> float:
                return 0.01 + target.ran_ms  # the host's wake-up, then what was left running

        return Busy()


def _hidden_work(hidden_ms: float, when: str = "after", every: int = 1) -> paired_times.PairedTimes:
    target = HiddenWorkTarget(hidden_ms, when, every)

    def side(name: str) -> Any:
        def call(inputs: list[Any]) -> list[Any]:
            target.side = name
            _busy(0.001)
            target.left_ms = target._hidden("after")
            return []
        return call

    return timing.measure_pair(target, side("b"), side("c"), [[1], [2], [3]], timing_budget_s=0.05,
                               target_precision=0.0, min_pairs=12, max_pairs=12, confidence=0.95, warmup_ms=1,
                               after_baseline=lambda out, i: None, after_candidate=lambda out, i: None)


def test_work_left_running_after_the_timed_region_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate that launches its work on a side stream and returns: the events on the current stream time
    nothing, the device-wide synchronize after the sample waits for it. The check that caught it before read the
    profile's streams, and rejected the reference itself where cuDNN forked and joined streams (L1 72, 75)."""
    from kforge_bot.evaluate.wire.checks import CheckFailure

    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.0)
    monkeypatch.setattr(timing, "LAUNCH_BOUND_SHARE", float("inf"))
    with pytest.raises(CheckFailure, match=r"the device was busy [\d.]+ us longer after the candidate's timed "
                                           r"samples than after the baseline's .*escapes the timer"):
        _hidden_work(HIDDEN_MS)
    # In a third of the samples only: the median pair ratio moves, the samples' median busy time would not.
    with pytest.raises(CheckFailure, match="escapes the timer"):
        _hidden_work(HIDDEN_MS, every=3)


def test_work_run_beside_the_settle_before_the_timed_region_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    """A red-team pass: work forked onto a stream that does not wait for the current one starts at once, beside
    the cache flush the settle queued ahead of the region, and can end before the region does; modelled through
    this loop it read 2x with the baseline's work hidden. It stretches the flush, the same work on both sides."""
    from kforge_bot.evaluate.wire.checks import CheckFailure

    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.0)
    monkeypatch.setattr(timing, "LAUNCH_BOUND_SHARE", float("inf"))
    with pytest.raises(CheckFailure, match=r"busy [\d.]+ us longer before the candidate's timed samples than "
                                           r"before the baseline's .*beside the cache flush"):
        _hidden_work(HIDDEN_MS, when="before")


def test_a_side_that_hides_nothing_passes_and_both_figures_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.0)
    monkeypatch.setattr(timing, "LAUNCH_BOUND_SHARE", float("inf"))
    result = _hidden_work(0.005)  # within the host's jitter
    # Each side's figure is the smaller of its timer's (0.01 ms, plus 0.005 ms left running on the candidate's) and the
    # host's wait in the synchronize; which side's is larger is the host's jitter (a preempted wait), not a verdict.
    assert 0 <= result.busy_after_ms["baseline"] <= 0.01 and 0 <= result.busy_after_ms["candidate"] <= 0.015
    assert result.busy_before_ms == {"baseline": 1.0, "candidate": 1.0}
    assert result.to_dict()["busy_after_ms"] == result.busy_after_ms
    assert result.to_dict()["busy_before_ms"] == result.busy_before_ms


def test_the_allowance_grows_with_the_candidates_sample() -> None:
    from kforge_bot.evaluate.wire.checks import CheckFailure

    none = {"baseline": 1.0, "candidate": 1.0}
    paired_times.check_no_hidden_work(none, {"baseline": 0.01, "candidate": 0.5}, candidate_sample_ms=20.0)  # 2.5%
    with pytest.raises(CheckFailure):
        paired_times.check_no_hidden_work(none, {"baseline": 0.01, "candidate": 0.5}, candidate_sample_ms=5.0)  # 10%


def test_both_sides_of_an_eager_short_sample_get_the_same_lead(monkeypatch: pytest.MonkeyPatch) -> None:
    """A side's settle must be the same work as the other's, or a stretched one cannot be told from a longer one;
    and a candidate must not lengthen its own window by spending host time in its warm-up calls."""
    monkeypatch.setattr(timing, "MIN_SAMPLE_MS", SAMPLE_MS)
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.0)
    monkeypatch.setattr(timing, "LAUNCH_BOUND_SHARE", float("inf"))
    LeadRecordingTarget.leads = []

    def quick(inputs: list[Any]) -> list[Any]:
        _busy(0.001)
        return []

    def slow_host(inputs: list[Any]) -> list[Any]:
        _busy(0.003)
        return []

    result = timing.measure_pair(LeadRecordingTarget(), quick, slow_host, [[1], [2], [3]], timing_budget_s=0.1,
                                 target_precision=0.5, min_pairs=4, max_pairs=4, confidence=0.95, warmup_ms=WARM_MS,
                                 after_baseline=lambda out, i: None, after_candidate=lambda out, i: None)
    assert result.launch == "eager" and result.calls_per_sample >= 2
    timed_leads = LeadRecordingTarget.leads[-2 * len(result.baseline_ms):]
    assert len(set(timed_leads)) == 1 and timed_leads[0] > 0, timed_leads


class HostBoundTarget(LeadRecordingTarget):
    """A device whose calls take `launch_s` of the host unless the sample began behind a lead that covers them:
    a whole model whose launches outlast the device's own work (KernelBench level 3's small networks)."""

    launch_s, device_s = 0.020, 0.0005

    def settle(self, lead_ms: float = 0.0, mark: Any = None, figures: Any = None) -> float:
        return super().settle(lead_ms, mark, figures)

    @classmethod
    def call(cls, inputs: list[Any]) -> list[Any]:
        covered = LeadRecordingTarget.leads and LeadRecordingTarget.leads[-1] >= cls.launch_s * 1000
        _busy(cls.device_s if covered else cls.launch_s)
        return []


def test_a_single_eager_call_a_sample_gets_a_lead_covering_its_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    """One call a sample used to get no lead beyond the settle: a model whose launches took longer left the device
    waiting on the host, so the sample timed the host (and two instances of one model could read apart)."""
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.0)
    monkeypatch.setattr(timing, "LAUNCH_BOUND_SHARE", float("inf"))  # eager whatever the estimate
    LeadRecordingTarget.leads = []

    def launch_bound(inputs: list[Any]) -> list[Any]:
        _busy(0.003)
        return []

    result = timing.measure_pair(LeadRecordingTarget(), launch_bound, launch_bound, [[1], [2], [3]],
                                 timing_budget_s=0.1, target_precision=0.5, min_pairs=4, max_pairs=4,
                                 confidence=0.95, warmup_ms=5, after_baseline=lambda out, i: None,
                                 after_candidate=lambda out, i: None)
    assert result.launch == "eager" and result.calls_per_sample == 1
    timed_leads = LeadRecordingTarget.leads[-2 * len(result.baseline_ms):]
    assert all(lead >= 3.0 for lead in timed_leads), timed_leads


def test_the_graph_decision_follows_the_devices_time_not_the_hosts_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decided on the warm-up's host-bound times, a model whose launches take about the threshold flipped between
    eager and graph replay from run to run. The decision now uses calls queued behind a lead (the device's time),
    and both per-call figures are kept: the eager one for the note a user calling it eagerly needs."""
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 5.0)  # device 0.5 ms < 5 ms < 20 ms of launches
    monkeypatch.setattr(timing, "MIN_SAMPLE_MS", 0.1)
    monkeypatch.setattr(timing, "capture_graphs", lambda target, fns, sets: (fns, ""))
    LeadRecordingTarget.leads = []
    result = timing.measure_pair(HostBoundTarget(), HostBoundTarget.call, HostBoundTarget.call, [[1], [2], [3]],
                                 timing_budget_s=0.1, target_precision=0.5, min_pairs=4, max_pairs=4,
                                 confidence=0.95, warmup_ms=5, after_baseline=lambda out, i: None,
                                 after_candidate=lambda out, i: None)
    assert result.launch == "cuda_graph"
    for side in ("baseline", "candidate"):
        figures = result.per_call_ms[side]
        assert figures["eager"] >= 20.0 and figures["device"] < figures["eager"] / 4, result.per_call_ms


def test_a_call_whose_launches_outlast_its_device_work_is_replayed_from_graphs_however_long(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole model of thousands of launches (level 3's LSTMs: 40 ms of the host, 24 ms of the device) runs at the
    host's pace whatever the lead: timed eagerly, its A/A read +-4.5%. Over GRAPH_BELOW_MS, it is replayed too."""
    monkeypatch.setattr(timing, "GRAPH_BELOW_MS", 0.001)
    monkeypatch.setattr(timing, "capture_graphs", lambda target, fns, sets: (fns, "replayed"))

    def host_paced(inputs: list[Any]) -> list[Any]:
        _busy(0.003)
        return []

    result = timing.measure_pair(LaunchBoundTarget(), host_paced, host_paced, [[1], [2], [3]], timing_budget_s=0.1,
                                 target_precision=0.5, min_pairs=4, max_pairs=4, confidence=0.95, warmup_ms=5,
                                 after_baseline=lambda out, i: None, after_candidate=lambda out, i: None)
    assert result.launch == "cuda_graph"
    assert timing.launch_bound({"baseline": {"host_issue": 40.0, "device": 24.0}})
    assert not timing.launch_bound({"baseline": {"host_issue": 2.3, "device": 3.1}})  # level 3's VGG16


class SlowHostTarget(LaunchBoundTarget):
    """A device whose host takes `host_ms` to wake and close a region: every region's busy-after figure holds it,
    plus `left_ms` of work a call left running (run out by the next synchronize)."""

    def __init__(self, host_ms: float) -> None:
        super().__init__()
        self.host_ms, self.left_ms, self.ran_ms, self.flushes = host_ms, 0.0, 0.0, 0

    def flush_cache(self) -> None:
        self.flushes += 1

    def timer(self) -> Timer:
        target = self

        class Tail(HostTimer):
            def busy_after_ms(self) -> float:
                return target.host_ms + target.ran_ms

        return Tail()

    def synchronize(self) -> None:
        self.ran_ms, self.left_ms = self.left_ms, 0.0
        _busy((self.host_ms + self.ran_ms) / 1000.0)


def test_a_sample_s_busy_after_is_net_of_its_host_s_own_tail_measured_right_after_it() -> None:
    # Base and head in workers of their own: each process's host wakes and closes a region in its own time (H100:
    # 11-60 us, drifting within a process). Each sample's figure is taken net of a region of the process's own,
    # with nothing left running, right after it; work the call left running still shows.
    def leave(target: SlowHostTarget, ms: float) -> Callable[[list[Any]], None]:
        return lambda inputs: setattr(target, "left_ms", ms)

    for host_ms in (0.011, 0.060):
        target = SlowHostTarget(host_ms)
        honest = sample.timed_sample(target, leave(target, 0.0), [[]], [0])
        assert honest.busy_after_ms == 0.0 and honest.host_tail_ms == host_ms
        hiding = sample.timed_sample(target, leave(target, 0.5), [[]], [0])
        assert hiding.busy_after_ms == 0.5 and hiding.host_tail_ms == host_ms


def test_on_the_cpu_nothing_runs_after_a_region_and_nothing_is_flushed_to_find_out() -> None:
    target = SlowHostTarget(2.0)
    target.kind = "cpu"
    flushes = target.flushes
    result = sample.timed_sample(target, lambda inputs: None, [[]], [0])
    assert result.host_tail_ms == 0.0 and result.busy_after_ms == 2.0
    assert target.flushes == flushes + 1  # the settle's own: no region after the sample


class FlushCountTarget(LaunchBoundTarget):
    """A device whose settle runs `flushes` flushes of 85 us (as an H100's 256 MB fill), plus `beside_ms` of work
    something ran beside them; the count is this process's own choice for the lead."""

    def __init__(self, flushes: int, beside_ms: float = 0.0) -> None:
        super().__init__()
        self.flushes, self.beside_ms = flushes, beside_ms

    def settle(self, lead_ms: float = 0.0, mark: Any = None, figures: Any = None) -> float:
        return self.flushes * 0.085

    def timer(self) -> Timer:
        target = self

        class Settled(HostTimer):
            def settle_ms(self) -> float:
                return target.flushes * 0.085 + target.beside_ms

        return Settled()


def test_a_sample_s_busy_before_is_its_settle_beyond_the_work_its_own_process_chose() -> None:
    # Base and head in workers of their own: one rounded its flush count for the lead to 12, the other to 13. An
    # honest head is not 85 us "busier before" for that; work run beside its flushes still shows.
    def busy_before(target: Target) -> float:
        return sample.timed_sample(target, lambda inputs: None, [[]], [0]).busy_before_ms

    base, head = busy_before(FlushCountTarget(12)), busy_before(FlushCountTarget(13))
    assert abs(base) < 1e-9 and abs(head) < 1e-9
    paired_times.check_no_hidden_work({"baseline": base, "candidate": head}, {}, 0.3)
    hiding = busy_before(FlushCountTarget(13, beside_ms=0.1))
    with pytest.raises(CheckFailure, match="busy 100.0 us longer before"):
        paired_times.check_no_hidden_work({"baseline": base, "candidate": hiding}, {}, 0.3)
