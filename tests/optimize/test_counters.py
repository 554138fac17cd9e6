"""Hardware counters in the optimize loop (kforge_bot.optimize.counters): what gets profiled, what the run keeps, and
the speed-of-light stop. ncu itself is a stand-in (tests/fakes/ncu.py) printing output recorded on an H200."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from kforge_bot.config.policy import Budgets
from kforge_bot.counters import ncu
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.optimize.digest import profile_digest
from kforge_bot.optimize.run import OptimizeRun, RunConfig
from kforge_bot.optimize.stops import StopRules
from kforge_bot.kernelspec import load_spec



def _events(folder: Path, kind: str) -> list[dict]:
    return [e for e in map(json.loads, (folder / "trajectory.jsonl").read_text().splitlines()) if e["event"] == kind]


def _tuner_run(kernel_dir: Path, report: Path, *, iterations: int, timing_budget_s: float,
               **config: Any) -> OptimizeRun:
    """The built-in tuner (no model) on the fixture kernel, on the CPU, its report in `report`."""
    settings = EvalSettings(seeds=2, timing_budget_s=timing_budget_s, timeout_s=120)
    return OptimizeRun.open(load_spec(kernel_dir / "kforge.yaml"),
                            RunConfig(target="cpu", budgets=Budgets(iterations=iterations), settings=settings,
                                      cpu_count=2, **config), report)


@pytest.mark.slow
def test_the_kernel_as_written_and_each_accepted_candidate_are_profiled(kernel_dir: Path, tmp_path: Path,
                                                                       recorded_ncu: None) -> None:
    report = tmp_path / "report"
    run = _tuner_run(kernel_dir, report, iterations=1, timing_budget_s=2.0,
                     rules=StopRules(patience=6, speed_of_light=1.01))
    outcome = run.run()
    files = run.finish()
    profiled = [e["iteration"] for e in _events(report, "counters")]
    assert profiled[0] == 0  # the kernel as written, before any candidate
    best = outcome.record.best
    assert best is not None, outcome.stop_reason  # TILE_N 64 (test_loop's tuner test): profiled too
    assert profiled == [0, best.iteration]
    rows = list(csv.DictReader(io.StringIO((report / "ncu-details.csv").read_text())))
    assert {r["side"] for r in rows} == {"before", f"iteration {best.iteration}"}
    digest = profile_digest(outcome.record, best.iteration)
    assert digest["ncu"] and digest["ncu_before"] and digest["ncu_summary"]["class"]
    assert (report / "ncu" / f"{best.iteration:04d}.csv").is_file()
    assert (report / "ncu" / "baseline.csv").is_file()
    assert "Hardware counters" in Path(files.markdown).read_text()


@pytest.mark.slow
def test_a_kernel_at_its_speed_of_light_ends_the_run_before_any_candidate(kernel_dir: Path, tmp_path: Path,
                                                                       recorded_ncu: None) -> None:
    report = tmp_path / "report"
    run = _tuner_run(kernel_dir, report, iterations=5, timing_budget_s=0.3,
                     rules=StopRules(speed_of_light=0.5))
    outcome = run.run()
    assert outcome.stop_kind == "NearRoofline", outcome.stop_reason
    assert "of its speed of light by the hardware's counters" in outcome.stop_reason
    assert outcome.record.iterations_used == 0


@pytest.mark.slow
def test_without_counters_the_run_says_why_once_and_goes_on(kernel_dir: Path, tmp_path: Path) -> None:
    report = tmp_path / "report"
    run = _tuner_run(kernel_dir, report, iterations=1, timing_budget_s=0.3)
    run.run()
    files = run.finish()
    said = _events(report, "counters")
    assert len(said) == 1 and said[0]["iteration"] is None and "CUDA targets only" in said[0]["reason"]
    assert not (report / "ncu-details.csv").exists()
    assert "CUDA targets only" in Path(files.markdown).read_text()


def test_after_ncu_itself_fails_the_run_stops_paying_for_it(kernel_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A hung or refused ncu costs its limit once, not once per accepted candidate."""
    from kforge_bot.optimize.counters import Counters
    from kforge_bot.kernelspec import Implementation

    monkeypatch.setattr(ncu, "unavailable", lambda target: None)
    calls: list[str] = []

    def refused(*args: object, **kwargs: object) -> dict:
        calls.append(str(args[4]))
        return {"available": False, "reason": "ncu did not finish within 60 s"}

    monkeypatch.setattr(ncu, "collect", refused)
    spec = load_spec(kernel_dir / "kforge.yaml")
    counters = Counters(spec, "cuda", EvalSettings(), tmp_path)
    assert counters.collect(0, spec.baseline, 1.0)["available"] is False
    assert counters.reason == "ncu failed on an earlier kernel version (ncu did not finish within 60 s)"
    assert calls == ["baseline"] and isinstance(spec.baseline, Implementation)


@pytest.mark.slow
def test_a_parallel_round_profiles_its_best_after_every_evaluation_returned(kernel_dir: Path, tmp_path: Path,
                                                                          recorded_ncu: None) -> None:
    report = tmp_path / "report"
    run = _tuner_run(kernel_dir, report, iterations=2, timing_budget_s=2.0, parallel=2,
                     rules=StopRules(patience=6, speed_of_light=1.01))
    outcome = run.run()
    profiled = [e["iteration"] for e in _events(report, "counters")]
    assert profiled[0] == 0
    best = outcome.record.best
    assert best is not None, outcome.stop_reason  # the round holds TILE_N 32->64
    assert profiled == [0, best.iteration], profiled
    # The profile comes after the round's last result, not between its results.
    lines = [json.loads(x) for x in (report / "trajectory.jsonl").read_text().splitlines()]
    last_result = max(i for i, e in enumerate(lines) if e["event"] == "result")
    assert [i for i, e in enumerate(lines) if e["event"] == "counters"][-1] > last_result
