"""The gate's decision rule: the regression bound, the timing decision, harness verdicts, the exit code and
how changes and thresholds are written."""

from __future__ import annotations

import pytest

from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.gate.decision import (
    FAILING,
    exit_code,
    fmt_change,
    fmt_threshold,
    harness_verdict,
    regression_bound,
    timing_decision,
)


def test_regression_bound_and_decisions():
    assert regression_bound(0.02) == pytest.approx(1 / 1.02)
    t = 0.02
    assert timing_decision((0.90, 0.95), t) == "regression"      # whole interval below 1/1.02 = 0.9804
    assert timing_decision((0.95, 0.99), t) == "uncertain"       # straddles the bound: confirm
    assert timing_decision((0.979, 0.981), t) == "uncertain"
    assert timing_decision((0.981, 1.01), t) == "pass"           # a 1.9% slowdown is within the threshold
    assert timing_decision((0.99, 1.01), t) == "pass"
    assert timing_decision((1.01, 1.03), t) == "pass"            # faster, but not by more than the threshold
    assert timing_decision((1.03, 1.05), t) == "improved"
    assert timing_decision(None, t) == "unmeasured"            # too few pairs for an interval: confirm
    assert timing_decision((0.5, 0.9), 0.0) == "regression"      # threshold 0: any confident slowdown
    assert timing_decision((0.9, 1.1), 0.0) == "uncertain"
    assert fmt_threshold(0.05, "cpu") == "5% (cpu)" and fmt_threshold(0.025) == "2.5%" and fmt_threshold(None) == "-"


def test_harness_verdicts_map_to_gate_verdicts():
    def r(verdict: str, reason: str = "why") -> EvalResult:
        return EvalResult(verdict=verdict, reason=reason, target="cpu")

    assert harness_verdict(r("pass")) is None
    assert harness_verdict(r("incorrect"))[0] == "incorrect"
    assert harness_verdict(r("rejected", "output 0 shares memory with input 0"))[0] == "incorrect"
    assert harness_verdict(r("rejected", "static check: import gc"))[0] == "error"
    assert harness_verdict(r("compile_error", "ImportError: x"))[0] == "error"
    assert harness_verdict(r("crash"))[0] == "error"
    assert harness_verdict(r("timeout"))[0] == "error"
    assert exit_code(["pass", "improved", "skipped"]) == 0
    assert all(exit_code([v]) == 1 for v in FAILING)
    # an unmeasured required target fails only when every required target must be measured here
    assert exit_code(["pass", "skipped"], unmeasured_required=2) == 0
    assert exit_code(["pass", "skipped"], unmeasured_required=2, require_all_targets=True) == 1
    assert exit_code(["pass"], unmeasured_required=0, require_all_targets=True) == 0


def test_change_formatting():
    assert fmt_change(1 / 1.031, (1 / 1.034, 1 / 1.028)) == "+3.1% (+2.8% to +3.4%)"
    assert fmt_change(1.25, (1.2, 1.3)) == "-20.0% (-23.1% to -16.7%)"
    assert fmt_change(0.05, (0.048, 0.052)) == "20.0x slower (19.2x-20.8x)"
    assert fmt_change(None, None) == "n/a"



def test_a_backward_slower_than_the_threshold_is_a_regression_though_forward_plus_backward_is_not() -> None:
    from kforge_bot.gate.decision import direction_regressions
    from kforge_bot.gate.measure import _decision, _timing_reason

    def result(backward_ci: list[float]) -> EvalResult:
        return EvalResult(verdict="pass", reason="", target="cpu", speedup=0.99, speedup_ci=(0.97, 1.01), details={
            "directions": {"forward": {"speedup": 1.0, "speedup_ci": [0.99, 1.01]},
                           "backward": {"speedup": 0.9, "speedup_ci": backward_ci},
                           "forward+backward": {"speedup": 0.99, "speedup_ci": [0.97, 1.01]}}})

    slower = result([0.88, 0.92])
    assert direction_regressions(slower, 0.05) == ["backward"]
    assert _decision(slower, 0.05) == "regression"
    assert _timing_reason("regression", slower, 0.05).startswith("the backward (")
    unresolved = result([0.90, 1.02])
    assert direction_regressions(unresolved, 0.05) == [] and _decision(unresolved, 0.05) == "pass"
    plain = EvalResult(verdict="pass", reason="", target="cpu", speedup=1.0, speedup_ci=(0.99, 1.01))
    assert _decision(plain, 0.05) == "pass"


def test_the_decision_on_a_result_goes_shape_set_by_shape_set():
    from kforge_bot.evaluate.wire.result import EvalResult
    from kforge_bot.evaluate.wire.shapes import ShapeSpeedup
    from kforge_bot.gate.decision import result_decision

    def result(*sets: tuple[float, tuple[float, float] | None, bool], headline=(1.3, 1.6)) -> EvalResult:
        per_shape = [ShapeSpeedup(i, {}, s, ci, 1.0, 1.0 / s, 30, threshold=0.05, informational=info)
                     for i, (s, ci, info) in enumerate(sets)]
        return EvalResult("pass", "", "cpu", speedup=1.4, speedup_ci=headline, per_shape=per_shape)

    fast, slow, close = (6.0, (5.0, 7.0), False), (0.14, (0.12, 0.16), False), (0.95, (0.9, 1.0), False)
    assert result_decision(result(fast, slow), 0.05) == "regression"  # however fast the other set
    assert result_decision(result(fast, close), 0.05) == "uncertain"  # straddles its bound: confirm
    assert result_decision(result(fast, (1.0, None, False)), 0.05) == "unmeasured"
    assert result_decision(result(fast, fast), 0.05) == "improved"
    assert result_decision(result(fast, (0.14, (0.12, 0.16), True)), 0.05) == "improved"  # informational
    assert result_decision(result(fast, fast, headline=(0.99, 1.01)), 0.05) == "pass"
    assert result_decision(EvalResult("pass", "", "cpu", speedup=0.5, speedup_ci=(0.4, 0.6)), 0.05) == "regression"
