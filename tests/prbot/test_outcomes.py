"""One kernel's outcome: whether a result earns a follow-up PR, and the evidence recorded for it."""

from __future__ import annotations

from kforge_bot.prbot import outcomes
from kforge_bot.evaluate.wire.result import EvalResult


def test_qualifies_uses_the_lower_end_of_the_interval():
    good = EvalResult("pass", "ok", "cpu", speedup=1.5, speedup_ci=(1.2, 1.8))
    assert outcomes.qualifies(good, 1.05) == (True, "")
    ok, why = outcomes.qualifies(good, 1.3)
    assert not ok and "min_speedup 1.3" in why and "1.50x" in why
    assert not outcomes.qualifies(EvalResult("incorrect", "output 0 differs", "cpu"), 1.0)[0]
    assert "no improvement" in outcomes.qualifies(None, 1.05)[1]


def test_a_result_with_a_shape_set_regression_earns_no_pr_and_its_evidence_shows_each_set():
    from kforge_bot.prbot.evidence import render_pr_body, render_summary
    from kforge_bot.evaluate.wire.shapes import ShapeSpeedup

    sets = [ShapeSpeedup(0, {"n": 16}, 0.05, (0.04, 0.06), 0.01, 0.2, 40, threshold=0.05),
            ShapeSpeedup(1, {"n": 128}, 30.0, (25.0, 35.0), 3.0, 0.1, 40, threshold=0.05)]
    mixed = EvalResult("pass", "ok", "cpu", speedup=1.22, speedup_ci=(1.1, 1.3), per_shape=sets)
    ok, why = outcomes.qualifies(mixed, 1.05)
    assert not ok and "a regression on shape set 0 (n=16)" in why
    row = outcomes.target_row(mixed, "cpu", kind="cpu")
    assert [s["shape_set"] for s in row.shapes] == [0, 1] and row.shapes[0]["regression"] is True
    outcome = outcomes.KernelEvidence(kernel="mm", file="mm.py", targets=(row,))
    body = render_pr_body(outcome, pr_number=7, head_branch="feature")
    assert "Per shape set (the speedup above is the geometric mean of these):" in body
    assert "| cpu | 0 (n=16) | 10.0 us | 200 us | 0.05x (0.04-0.06) | regression |" in body
    assert "| cpu | 1 (n=128) |" in body
    assert "| cpu | 0 (n=16) |" in render_summary([outcome])
    assert outcomes.KernelEvidence.from_dict(outcome.to_dict()) == outcome
