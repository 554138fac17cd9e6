"""The loop-control signals (kforge_bot.errors): which ones cost an iteration and which end the run."""

from __future__ import annotations

import pytest

from kforge_bot.errors import (BudgetExhausted, KforgeError, LLMUnavailable, LoopControl, MalformedReply,
                               NonTerminating, Terminating)


def test_each_signal_says_whether_the_run_goes_on_and_carries_what_the_loop_needs() -> None:
    malformed = MalformedReply("the reply had no fenced code block")
    assert isinstance(malformed, NonTerminating) and not isinstance(malformed, Terminating)
    assert malformed.feedback == str(malformed) == "the reply had no fenced code block"
    gone = LLMUnavailable("HTTP 401", status=401, attempts=1)
    spent = BudgetExhausted("token budget spent (450 of 400)", budget="tokens")
    assert isinstance(gone, Terminating) and isinstance(spent, Terminating)
    assert (gone.status, gone.attempts, spent.budget) == (401, 1, "tokens")


def test_signals_are_not_user_errors() -> None:
    """A loop signal never reaches the CLI as a one-line error, and a user error is no loop signal."""
    assert not issubclass(LoopControl, KforgeError) and not issubclass(KforgeError, LoopControl)
    with pytest.raises(LoopControl):
        raise BudgetExhausted("iteration budget spent (2 of 2)", budget="iterations")
