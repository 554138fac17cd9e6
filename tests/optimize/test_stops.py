"""When a run stops (kforge_bot.optimize.stops): each proposer's rules, the budgets' stops over them, and the pure
function that decides from the record."""

from __future__ import annotations

from kforge_bot.config.policy import Budgets
from kforge_bot.errors import BudgetExhausted, NoProgress
from kforge_bot.optimize.protocols import LLM, TUNER
from kforge_bot.optimize.record import RunRecord
from kforge_bot.optimize.stops import StopRules, quick_rules, stop_signal, tokens_spent


def test_the_tuner_gets_more_patience_than_a_model() -> None:
    assert quick_rules(TUNER).patience == 6 and quick_rules(LLM).patience == 4
    assert quick_rules(TUNER) == StopRules(patience=6)  # the rest: the rules' defaults


def test_the_budgets_patience_and_speed_of_light_replace_the_modes_own() -> None:
    rules = quick_rules(LLM, Budgets(patience=9, speed_of_light=0.6))
    assert (rules.patience, rules.speed_of_light) == (9, 0.6)
    assert quick_rules(TUNER, Budgets(patience=None)).patience == 6


def record_of(*events: dict) -> RunRecord:
    """A run's state folded from events alone: no trajectory file, no loop."""
    record = RunRecord()
    for e in events:
        record.apply(e)
    return record


def miss(n: int) -> dict:
    return {"event": "malformed", "iteration": n, "agent": "generator", "feedback": "no code"}


def test_the_stop_signal_is_a_function_of_the_record_and_the_measured_times() -> None:
    go_on = {"elapsed_s": 0.0, "step_s": 0.0, "session_iterations": 0}
    assert stop_signal(RunRecord(), Budgets(iterations=3), StopRules(), **go_on) is None
    spent = stop_signal(record_of(miss(1), miss(2)), Budgets(iterations=2), StopRules(), **go_on)
    assert isinstance(spent, BudgetExhausted) and spent.budget == "iterations"
    assert str(spent) == "iteration budget spent (2 of 2)"

    timed = Budgets(iterations=9, time_limit_s=60)
    assert stop_signal(RunRecord(), timed, StopRules(), elapsed_s=30.0, step_s=25.0, session_iterations=0) is None
    late = stop_signal(RunRecord(), timed, StopRules(), elapsed_s=40.0, step_s=25.0, session_iterations=0)
    assert isinstance(late, BudgetExhausted) and str(late) == "time limit: 40 s of 60 s spent and a step takes about 25 s"

    tokens = record_of({"event": "reply", "iteration": 1, "agent": "generator", "usage": {"total_tokens": 450}})
    out = stop_signal(tokens, Budgets(iterations=9, tokens=400), StopRules(), **go_on)
    assert isinstance(out, BudgetExhausted) and out.budget == "tokens" and str(out) == "token budget spent (450 of 400)"
    assert tokens_spent(tokens, Budgets(iterations=9, tokens=451)) is None
    assert tokens_spent(tokens, Budgets(iterations=9, tokens=None)) is None

    misses = record_of(miss(1), miss(2), miss(3), miss(4))
    patience = StopRules(patience=2)
    assert isinstance(stop_signal(misses, Budgets(iterations=9), patience, elapsed_s=0, step_s=0,
                                  session_iterations=4), NoProgress)
    # A resumed session counts its own misses only; a parallel run's patience counts rounds of candidates.
    assert stop_signal(misses, Budgets(iterations=9), patience, elapsed_s=0, step_s=0, session_iterations=1) is None
    assert stop_signal(misses, Budgets(iterations=9), patience, elapsed_s=0, step_s=0, session_iterations=4,
                       parallel=3) is None
