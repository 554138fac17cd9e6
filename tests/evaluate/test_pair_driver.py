"""The parent's schedule of a pair timed across two workers (pair_driver), against sides that answer in-process."""

from __future__ import annotations

from typing import Any

import pytest

from kforge_bot.evaluate import pair_driver
from kforge_bot.evaluate.wire import timing
from kforge_bot.evaluate.pair_driver import HiddenWork, drive_session
from kforge_bot.evaluate.wire.result import EvalSettings


class FakeSide:
    """A side answering the driver's requests with fixed figures, keeping every request it was sent."""

    def __init__(self, ms: float, capture: str = "", busy_after_ms: float = 0.0, host_tail_ms: float = 0.0,
                 settle_figures: dict[str, float] | None = None) -> None:
        self.ms, self.capture_answer, self.busy_after_ms = ms, capture, busy_after_ms
        self.host_tail_ms = host_tail_ms  # each sample's, as the worker measures it right after (wire.sample)
        self.settle_figures = settle_figures  # as RemoteSide keeps them from the worker's setup
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def ask(self, op: str, **args: Any) -> Any:
        self.requests.append((op, args))
        if op == "warm_up":
            return {"eager": self.ms, "host_issue": 0.01}
        if op in ("device_estimate", "replayed_estimate"):
            return self.ms
        if op == "capture":
            return self.capture_answer
        if op == "drop_graphs":
            return None
        assert op == "sample", op
        return {"ms": self.ms, "busy_after_ms": self.busy_after_ms, "busy_before_ms": 0.0,
                "host_tail_ms": self.host_tail_ms, "reading": {}}


SETTINGS = EvalSettings(timing_budget_s=5.0, min_pairs=4, max_pairs=6, target_precision=-1.0, warmup_ms=1.0)


def _drive(b: FakeSide, c: FakeSide, device: str = "cpu", refresh: bool = False) -> dict[str, Any]:
    sides: dict[str, Any] = {"b": b, "c": c}
    return drive_session(sides, {"device": device, "sets": 3, "refresh": refresh}, SETTINGS, 1, None, 0)


def test_every_pair_is_timed_and_each_side_is_asked_only_for_its_own_samples() -> None:
    b, c = FakeSide(2.0), FakeSide(1.0)
    result = _drive(b, c)
    assert result["baseline_ms"] == [2.0] * 6 and result["candidate_ms"] == [1.0] * 6
    assert result["stop_reason"] == "reached 6 pairs"
    samples_b = [args["pair"] for op, args in b.requests if op == "sample"]
    assert samples_b == list(range(6))
    # Every request carries the schedule alone (the pair, calls a sample, the lead, the settle's plan): never the
    # other side's figures.
    for side in (b, c):
        for op, args in side.requests:
            assert set(args) <= {"warmup_ms", "lead_ms", "pair", "k", "settle"}, (op, args)
    # Both sides get one lead.
    assert [a["lead_ms"] for op, a in b.requests if op == "sample"] == \
        [a["lead_ms"] for op, a in c.requests if op == "sample"]


def test_the_pair_order_alternates_like_measure_pairs() -> None:
    calls: list[str] = []

    class Recording(FakeSide):
        def __init__(self, name: str, ms: float) -> None:
            super().__init__(ms)
            self.tag = name

        def ask(self, op: str, **args: Any) -> Any:
            if op == "sample":
                calls.append(f"{self.tag}{args['pair']}")
            return super().ask(op, **args)

    drive_session({"b": Recording("b", 1.0), "c": Recording("c", 1.0)}, {"device": "cpu", "sets": 3},
                  SETTINGS, 1, None, 0)
    assert calls[:6] == ["b0", "c0", "c1", "b1", "b2", "c2"]


def test_a_capture_that_fails_on_one_side_keeps_both_eager() -> None:
    b, c = FakeSide(0.05), FakeSide(0.05, capture="capture warning: a kernel on the legacy stream")
    result = _drive(b, c, device="cuda")
    assert result["mode"] == "eager" and "graph capture failed" in result["mode_note"]
    assert ("drop_graphs", {}) in b.requests and ("drop_graphs", {}) not in c.requests


def test_graphs_on_both_sides_are_replayed_and_no_lead_is_given() -> None:
    b, c = FakeSide(0.05), FakeSide(0.05)
    result = _drive(b, c, device="cuda")
    assert result["mode"] == "cuda_graph"
    assert result["calls_per_sample"] == min(timing.calls_per_sample_for(0.05), 3)
    assert {a["lead_ms"] for op, a in c.requests if op == "sample"} == {0.0}


def test_work_the_candidate_hides_after_its_samples_rejects_it() -> None:
    with pytest.raises(HiddenWork, match="busy"):
        _drive(FakeSide(1.0), FakeSide(1.0, busy_after_ms=0.5), device="cuda")


def test_each_side_s_host_tail_is_reported_and_not_taken_off_again() -> None:
    # The workers' figures are already net of each sample's own host tail (wire.sample.host_tail): the parent
    # reports the tails and judges the figures as sent.
    result = _drive(FakeSide(0.3, busy_after_ms=0.001, host_tail_ms=0.015),
                    FakeSide(0.3, busy_after_ms=0.002, host_tail_ms=0.045), device="cuda")
    assert result["busy_after_ms"] == {"baseline": 0.001, "candidate": 0.002}
    assert result["host_tail_ms"] == {"baseline": 0.015, "candidate": 0.045}
    with pytest.raises(HiddenWork, match="busy 500.0 us longer after"):
        _drive(FakeSide(0.3, host_tail_ms=0.015), FakeSide(0.3, busy_after_ms=0.5, host_tail_ms=0.5), device="cuda")


def test_both_sides_settle_from_the_base_worker_s_figures() -> None:
    # Each worker measured its own flush (an H100's 256 MB fill: 83.3 and 86.5 us); both samples' settles must run
    # the same work, so both plan with the base's (targets.cuda.settle_plan checks they are within sense).
    b = FakeSide(0.3, settle_figures={"flush_ms": 0.0833, "spin_cycles_per_ms": 1.75e6})
    c = FakeSide(0.3, settle_figures={"flush_ms": 0.0865, "spin_cycles_per_ms": 1.80e6})
    _drive(b, c, device="cuda")
    for side in (b, c):
        sent = [args["settle"] for op, args in side.requests if op == "sample"]
        assert sent and all(figures == {"flush_ms": 0.0833, "spin_cycles_per_ms": 1.75e6} for figures in sent)


class _Worker:
    def __init__(self) -> None:
        self.commands: list[dict[str, Any]] = []
        self.waiting_on_parent = False

    def command(self, message: dict[str, Any]) -> None:
        self.commands.append(message)


def test_a_side_keeps_the_first_calibration_its_worker_sent_as_numbers() -> None:
    side = pair_driver.RemoteSide("baseline", _Worker(), None)  # type: ignore[arg-type]
    assert side.settle_figures is None
    side.on_message({"phase": "calibrated", "settle": {"flush_ms": 0.0833, "spin_cycles_per_ms": "fast", "x" * 99: 1}})
    # A second one came after setup, when candidate code could have sent it: ignored.
    side.on_message({"phase": "calibrated", "settle": {"flush_ms": 9.0}})
    assert side.settle_figures == {"flush_ms": 0.0833, "x" * 40: 1.0}
    for sent in ("lots", None, [1.0], {"flush_ms": None}):
        fresh = pair_driver.RemoteSide("baseline", _Worker(), None)  # type: ignore[arg-type]
        fresh.on_message({"phase": "calibrated", "settle": sent})
        assert fresh.settle_figures == {}, sent  # each side then plans with its own (targets.cuda.settle_plan)


def test_a_refreshed_session_is_timed_eagerly_and_asks_no_device_estimate() -> None:
    b, c = FakeSide(0.05), FakeSide(0.05)
    result = _drive(b, c, device="cuda", refresh=True)
    assert result["mode"] == "eager" and "put back between samples" in result["mode_note"]
    assert not any(op in ("device_estimate", "capture") for op, _ in b.requests + c.requests)


def test_the_driver_module_imports_no_framework() -> None:
    # The bot imports torch only once it compares (judge.py): the driver's rules come from timing lazily.
    assert "torch" not in pair_driver.__dict__
