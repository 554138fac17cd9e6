"""When a run stops early (kforge_bot.optimize.stops): each mode's rules, and the budgets' stops over them."""

from __future__ import annotations

from kforge_bot.config.policy import Budgets
from kforge_bot.optimize.proposer import LLM, TUNER
from kforge_bot.optimize.stops import StopRules, quick_rules


def test_the_tuner_gets_more_patience_than_a_model() -> None:
    assert quick_rules(TUNER).patience == 6 and quick_rules(LLM).patience == 4
    assert quick_rules(TUNER) == StopRules(patience=6)  # the rest: the rules' defaults


def test_the_budgets_patience_and_speed_of_light_replace_the_modes_own() -> None:
    rules = quick_rules(LLM, Budgets(patience=9, speed_of_light=0.6))
    assert (rules.patience, rules.speed_of_light) == (9, 0.6)
    assert quick_rules(TUNER, Budgets(patience=None)).patience == 6
