"""The scripted workers themselves: the bot's real side (plan, reference store, pair driver, judge) must read their
answers as it reads a real worker's, or the tests built on them prove nothing. Each verdict here has a real-worker
twin in tests/evaluate/test_api.py (marked slow)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.gate_repos import tiny_spec_in
from fakes.workers import FakeWorkers, Script

from kforge_bot.evaluate import EvalSettings, ReferenceStore, evaluate
from kforge_bot.evaluate import sandbox
from kforge_bot.kernelspec import Implementation, KernelSpec

QUICK = EvalSettings(timing_budget_s=0.5, isolation="off")


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KernelSpec:
    def no_real_worker(*args: object, **kwargs: object) -> None:
        raise AssertionError("a real worker was started")

    monkeypatch.setattr(sandbox.WorkerProcess, "__init__", no_real_worker)
    return tiny_spec_in(tmp_path)


def head(spec: KernelSpec, directive: str) -> Implementation:
    return Implementation(f"{spec.baseline.source}# fake-worker: {directive}\n", spec.baseline.symbol,
                          spec.baseline.filename, spec.baseline.root, spec.baseline.paths)


def test_a_head_scripted_twice_as_slow_is_timed_so_by_the_parent_in_two_side_workers(spec: KernelSpec) -> None:
    with FakeWorkers().installed() as fake:
        result = evaluate(spec, head(spec, "ms=2"), "cpu", QUICK, baseline=spec.baseline)
    assert result.verdict == "pass" and result.correctness["ok"], result.reason
    assert result.speedup is not None and result.speedup_ci is not None
    assert 0.45 < result.speedup_ci[0] <= result.speedup <= result.speedup_ci[1] < 0.55
    assert fake.started == {"reference": 1, "candidate": 2}  # base and head in workers of their own
    assert {r["side"] for r in fake.requests if r["role"] != "reference"} == {"candidate", "baseline"}


def test_scripted_failures_reach_their_verdicts(spec: KernelSpec) -> None:
    with FakeWorkers().installed():
        wrong = evaluate(spec, head(spec, "wrong"), "cpu", QUICK, baseline=spec.baseline)
        error = evaluate(spec, head(spec, "error='ImportError: no scale_v2'"), "cpu", QUICK, baseline=spec.baseline)
        crash = evaluate(spec, head(spec, "crash"), "cpu", QUICK, baseline=spec.baseline)
    assert wrong.verdict == "incorrect" and "outside" in wrong.reason, wrong.reason
    assert error.verdict == "compile_error" and "scale_v2" in error.reason, error.reason
    assert crash.verdict == "crash" and "SIGSEGV" in crash.reason, crash.reason
    assert crash.details["failed_side"] == "candidate"


def test_a_base_that_fails_is_charged_to_the_base(spec: KernelSpec) -> None:
    base = head(spec, "crash")
    with FakeWorkers().installed():
        result = evaluate(spec, spec.baseline, "cpu", QUICK, baseline=base)
    assert result.details["failed_side"] == "baseline", result.reason


def test_one_reference_run_serves_every_candidate_of_a_store(spec: KernelSpec) -> None:
    store = ReferenceStore()
    seeds = [1, 2]
    try:
        with FakeWorkers().installed() as fake:
            for directive in ("ms=1", "ms=3", "wrong"):
                evaluate(spec, head(spec, directive), "cpu", QUICK, baseline=spec.baseline, seeds=seeds,
                         references=store)
    finally:
        store.cleanup()
    assert fake.started["reference"] == 1 and fake.started["candidate"] == 6


def test_the_seam_is_put_back(spec: KernelSpec) -> None:
    with FakeWorkers().installed():
        assert sandbox.starter is not None
    assert sandbox.starter is None
