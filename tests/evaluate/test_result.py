"""The result of one evaluation, its settings and its timing statistics: plain data that round-trips through
JSON (the pool's slots and Ray actors send results as JSON; the cache and the reports store them)."""

from __future__ import annotations

import json
import math

from kforge_bot.evaluate.wire.result import VERDICTS, EvalResult, EvalSettings, TimingStats


def _through_json(data: dict) -> dict:
    return json.loads(json.dumps(data))


def test_timing_stats_round_trip_and_report_their_spread() -> None:
    stats = TimingStats(median_ms=2.0, q1_ms=1.9, q3_ms=2.3, min_ms=1.8, samples=40)
    data = _through_json(stats.to_dict())
    assert math.isclose(data["spread"], 0.2)
    assert TimingStats.from_dict(data) == stats  # the derived spread is not read back
    assert math.isnan(TimingStats(0.0, 0.0, 0.0, 0.0, 0).spread)


def test_settings_round_trip_and_their_cache_key_leaves_out_the_sandbox_mode() -> None:
    settings = EvalSettings(seeds=2, timing_budget_s=1.5, isolation="required", measure=False)
    assert EvalSettings.from_dict(_through_json(settings.to_dict())) == settings
    key = settings.key_material()
    assert "isolation" not in key and key["timing_budget_s"] == 1.5 and key["seeds"] == 2
    assert EvalSettings(isolation="off").key_material() == EvalSettings(isolation="required").key_material()
    assert EvalSettings(seeds=3).key_material() != EvalSettings(seeds=2).key_material()


def test_a_timed_result_round_trips_through_json() -> None:
    result = EvalResult(verdict="pass", reason="ok", target="cpu", device_name="some cpu",
                        baseline=TimingStats(2.0, 1.9, 2.1, 1.8, 40), candidate=TimingStats(1.0, 0.9, 1.1, 0.8, 40),
                        speedup=2.0, speedup_ci=(1.9, 2.1), correctness={"cases_checked": 9},
                        profile={"baseline": {"kernels": []}}, target_info={"kind": "cpu"},
                        details={"wall_s": 1.5}, cached=True)
    data = _through_json(result.to_dict())
    assert data["correct"] is True and data["speedup_ci"] == [1.9, 2.1]
    again = EvalResult.from_dict(data)
    assert again == result and isinstance(again.speedup_ci, tuple)
    assert again.faster and again.correct


def test_a_failed_result_round_trips_and_is_neither_correct_nor_faster() -> None:
    assert "compile_error" in VERDICTS and "pass" in VERDICTS
    crashed = EvalResult(verdict="crash", reason="SIGSEGV", target="cuda")
    data = _through_json(crashed.to_dict())
    assert data["baseline"] is None and data["speedup_ci"] is None and data["correct"] is False
    assert EvalResult.from_dict(data) == crashed
    assert not crashed.correct and not crashed.faster
    # Older or smaller documents: the optional fields take their defaults.
    minimal = EvalResult.from_dict({"verdict": "pass", "reason": "ok", "target": "cpu"})
    assert minimal.device_name == "" and minimal.details == {} and minimal.cached is False
    straddling = EvalResult(verdict="pass", reason="ok", target="cpu", speedup=1.01, speedup_ci=(0.99, 1.03))
    assert not straddling.faster  # the whole interval must lie above 1


def test_the_case_breakdown_adds_up_to_the_count_of_compared_outputs() -> None:
    """`check` and the optimize report say the count and what made it; the parts add up to the count."""
    from kforge_bot.evaluate.wire.result import case_breakdown

    records = [{"case": f"shape set {s} seed {n}"} for s in range(2) for n in range(3)]
    records += [{"case": "shape set 0 called again"}, {"case": "timed run 1"}, {"case": "timed run 2"},
                {"case": "input elements changed"}, {"case": "inputs moved between buffers"}]
    text = case_breakdown({"records": records, "seeds": [1, 2, 3], "shape_sets": [0, 1], "cases_checked": 11})
    assert text == ("6 = 3 seed(s) x 2 shape set(s), 1 same buffers refilled, 2 timed runs, 1 input elements changed, "
                    "1 inputs moved between buffers")
    assert sum(int(part.split()[0]) for part in text.split(", ")) == 11
