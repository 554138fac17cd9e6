"""When a run stops early: the stop rules (the signals the loop raises on them are in kforge_bot.errors)."""

from __future__ import annotations

from dataclasses import dataclass

from kforge_bot.config.policy import Budgets
from kforge_bot.optimize.proposer import TUNER


@dataclass(frozen=True)
class StopRules:
    patience: int = 4  # stop after this many iterations in a row without a new best
    roofline_fraction: float = 0.9  # stop once the best (or the baseline) reaches this fraction of its roofline
    speed_of_light: float = 0.9  # ... or, by ncu's counters, this fraction of its busiest unit's peak
    min_gain: float = 0.01  # a new best must beat the old one's speedup by this much (relative)


def quick_rules(mode: str, budgets: Budgets | None = None) -> StopRules:
    """The mode's rules, with the budgets' early stops (patience, speed of light) where they set them.

    The tuner's coordinate descent expects misses (each direction of each parameter is one), so it gets
    more patience than a model, whose misses mean it is out of ideas."""
    budgets = budgets or Budgets()
    return StopRules(patience=budgets.patience or (6 if mode == TUNER else 4), speed_of_light=budgets.speed_of_light)

