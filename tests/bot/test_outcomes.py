"""One kernel's outcome: whether a result earns a follow-up PR, and the evidence recorded for it."""

from __future__ import annotations

from kforge_bot.bot import outcomes
from kforge_bot.evaluate.result import EvalResult


def test_qualifies_uses_the_lower_end_of_the_interval():
    good = EvalResult("pass", "ok", "cpu", speedup=1.5, speedup_ci=(1.2, 1.8))
    assert outcomes.qualifies(good, 1.05) == (True, "")
    ok, why = outcomes.qualifies(good, 1.3)
    assert not ok and "min_speedup 1.3" in why and "1.50x" in why
    assert not outcomes.qualifies(EvalResult("incorrect", "output 0 differs", "cpu"), 1.0)[0]
    assert "no improvement" in outcomes.qualifies(None, 1.05)[1]
