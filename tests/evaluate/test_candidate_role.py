"""The candidate role (evaluate.worker.candidate_role): one shape set timed and checked in this process, what the
snapshot watches of the role, and the phases and report a real worker sends the parent.

The in-process runs skip what cannot be undone in a test process (hiding the harness, the audit hook, the
thread watch's patch of Thread.start); tests/evaluate/test_adversarial.py runs them in real workers."""

from __future__ import annotations

import time
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from kforge_bot.evaluate.worker import candidate_role, guards, importing, worker_io
from kforge_bot.evaluate.wire import checks
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.worker.candidate_role import CandidateRun
from kforge_bot.evaluate.worker.inheritance import inherits_forward
from kforge_bot.evaluate.worker.correctness_cases import CorrectnessCases
from kforge_bot.evaluate.worker.shape_timing import ShapeTiming, fill_buffers
from kforge_bot.evaluate.wire.graphs import GraphReplays
from kforge_bot.evaluate.wire.plan import Plan
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.worker.snapshot import CRITICAL, FunctionSnapshot
from kforge_bot.evaluate.wire.timing import RepeatCheck
from kforge_bot.evaluate.worker.worker_io import Stop
from kforge_bot.kernelspec import Implementation, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"
# max_pairs ends these runs; the budget only has to let min_pairs through on a loaded 2-core machine (beside two busy
# loops a pair took 40-435 ms: 0.05 s gave one pair, 0.5 s two).
TIMED = EvalSettings(seeds=2, timing_budget_s=2.0, min_pairs=3, max_pairs=6, warmup_ms=1, rotate_sets=2, profile=False)


class Recorder:
    """Stands in for the channel to the parent: keeps what the role sends."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def send(self, kind: str, **payload: Any) -> None:
        self.messages.append({"type": kind, **payload})


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CandidateRun:
    """A CandidateRun as setup() leaves it, with the honest softmax as its candidate."""
    monkeypatch.setattr(candidate_role, "hide_harness", lambda: None)
    monkeypatch.setattr(guards.ThreadWatch, "install", lambda self: None)
    monkeypatch.setattr(guards.AuditGuard, "install", lambda self: None)
    spec = load_spec(ADV / "problem.py")
    plan = Plan(role="candidate", target="cpu", spec=spec, baseline=spec.baseline, candidate=None, settings=TIMED,
                seeds=[11, 22], out_dir=tmp_path)
    candidate = CandidateRun(plan, Recorder(), tmp_path / "src", started=time.monotonic(), boot={})
    candidate.setup()
    candidate.candidate = _softmax
    candidate.shared, candidate.shared_before = [], []
    return candidate


def test_one_shape_set_is_timed_and_every_output_the_parent_checks_is_saved(run: CandidateRun) -> None:
    timed = ShapeTiming(run, 0).time_and_check()
    assert timed["shape"] == 0 and len(timed["baseline_ms"]) == len(timed["candidate_ms"]) >= TIMED.min_pairs
    plan = run.plan
    saved = {p.name for p in plan.out_dir.glob("*.out")}
    assert {plan.timed_cand_file(0, r) for r in range(TIMED.rotate_sets)} <= saved
    assert {c.cand_file for c in plan.changed_cases() + plan.moved_cases()} <= saved
    assert any(m["type"] == "progress" and m["phase"] == "timing" for m in run.channel.messages)


def test_a_patch_made_during_timing_stops_it_before_the_next_sample(run: CandidateRun,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0]

    def patching(x: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        if calls[0] == 2:
            monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
        return torch.softmax(x, dim=1)

    run.candidate = patching
    with pytest.raises(Stop) as stop:
        ShapeTiming(run, 0).time_and_check()
    assert stop.value.status == "rejected"
    assert "the candidate replaced time.perf_counter (while timing)" in stop.value.reason
    assert calls[0] == 2  # no sample after the one that patched


def test_inputs_changed_by_a_timed_call_are_a_rejection(run: CandidateRun) -> None:
    def mutating(x: torch.Tensor) -> torch.Tensor:
        out = torch.softmax(x, dim=1)
        x[0, 0] += 1.0
        return out

    run.candidate = mutating
    with pytest.raises(Stop) as stop:
        ShapeTiming(run, 0).time_and_check()
    # Its outputs drift with its inputs, so the check of every timed call against the first may see it first.
    assert stop.value.status == "rejected"
    assert stop.value.reason in ("timed run, shape set 0: input 0 was modified in place (inputs must stay unchanged)",
                                 "timed run, shape set 0: input set 0, output 0: a timed call's result differs from "
                                 "an earlier timed call's on the same inputs (work done in some calls only, or inputs "
                                 "changed by a call)")


def test_a_timed_output_is_kept_as_returned_and_then_poisoned(run: CandidateRun) -> None:
    timing = ShapeTiming(run, 0)
    out = torch.ones(2, 3)
    timing.after_candidate(out, 1)
    assert torch.equal(timing.kept[1][0], torch.ones(2, 3))
    assert out.isnan().all()  # a replayed graph that left it unwritten would show


def test_the_heartbeat_speaks_at_most_once_a_second(run: CandidateRun) -> None:
    timing = ShapeTiming(run, 0)
    timing.last_beat -= 2.0
    for pairs in range(5):
        timing.heartbeat(pairs)
    assert [m["pairs"] for m in run.channel.messages if m.get("phase") == "timing"] == [0]


# --------------------------------------------------------------------------------- what the snapshot sees


@pytest.mark.parametrize(("holder", "name"), [
    (CandidateRun, "guard"), (CandidateRun, "between_samples"), (ShapeTiming, "after_candidate"),
    (ShapeTiming, "call_candidate"), (checks, "poison_outputs"), (worker_io.Channel, "send"),
    (worker_io, "as_list"), (GraphReplays, "poison_outputs"), (RepeatCheck, "__call__"),
    # Moved out of CandidateRun and loading: still checked between samples, as they were there.
    (CorrectnessCases, "listed"), (importing, "import_implementation"),
])
def test_what_runs_between_timed_samples_is_checked_after_every_sample(holder: Any, name: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = FunctionSnapshot()
    monkeypatch.setattr(holder, name, lambda *args, **kwargs: None)
    prefix = holder.__name__ if isinstance(holder, types.ModuleType) else f"{holder.__module__}.{holder.__name__}"
    assert snapshot.changed(only=CRITICAL) == [f"{prefix}.{name}"]


# ------------------------------------------------------------------------------------------ helpers


def test_inheriting_the_baselines_forward_is_no_work_of_ones_own() -> None:
    class Baseline(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x, dim=1)

    class Inherits(Baseline):
        pass

    class Overrides(Baseline):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.exp() / x.exp().sum(dim=1, keepdim=True)

    assert inherits_forward(Inherits(), Baseline())
    assert not inherits_forward(Overrides(), Baseline())
    assert not inherits_forward(Baseline(), Baseline())  # the same class: an A/A run
    assert not inherits_forward(_softmax, Baseline())  # a function has no forward to inherit


def test_poison_and_fill_write_in_place() -> None:
    floats, ints, empty = torch.ones(3), torch.ones(3, dtype=torch.int64), torch.ones(0)
    checks.poison_outputs([floats, ints, empty, "not a tensor"])
    assert floats.isnan().all() and (ints == -1).all()
    buffer = torch.zeros(3)
    pointer = buffer.data_ptr()
    fill_buffers([buffer, 7], [torch.arange(3.0), 8])
    assert torch.equal(buffer, torch.arange(3.0)) and buffer.data_ptr() == pointer


# ------------------------------------------------------------------------------- a real candidate worker


@pytest.mark.slow
def test_the_phases_and_the_report_are_what_the_parent_reads() -> None:
    spec = load_spec(ADV / "problem.py")
    settings = EvalSettings(seeds=2, timing_budget_s=0.2, timeout_s=120)
    result = evaluate(spec, Implementation.from_file(ADV / "honest.py", "ModelNew"), "cpu", settings)
    assert result.verdict == "pass", result.reason
    phases = result.details["phases"]["candidate_worker"]
    assert set(phases) == {"setup_s", "boot", "import_s", "waited_for_reference_s", "correctness_s", "profile_s",
                           "timing_s", "first_call_s"}
    # Each side's first call on each shape set, apart: build time (torch.compile, a lazy load_inline, ...).
    # A held-out variant's new sizes may build again (a Triton JIT for new constants, a torch.compile recompile).
    assert set(phases["first_call_s"]) == {"candidate, shape set 0", "baseline, shape set 0",
                                           "candidate, held-out variant 0", "candidate, held-out variant 1"}
    assert set(result.profile) >= {"baseline", "candidate", "reference"}
    assert [t["shape_set"] for t in result.details["timing"]] == [0]
