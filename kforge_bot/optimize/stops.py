"""When a run stops: the stop rules, and `stop_signal`, the one function that decides between two rounds whether
the run goes on (the loop raises what it returns; the signals themselves are in kforge_bot.errors)."""

from __future__ import annotations

from dataclasses import dataclass

from kforge_bot.config.policy import Budgets
from kforge_bot.errors import BudgetExhausted, NearRoofline, NoProgress, Terminating
from kforge_bot.optimize.protocols import TUNER
from kforge_bot.optimize.record import RunRecord
from kforge_bot.text import one_line


@dataclass(frozen=True)
class StopRules:
    patience: int = 4  # stop after this many iterations in a row without a new best
    roofline_fraction: float = 0.9  # stop once the best (or the baseline) reaches this fraction of its roofline
    speed_of_light: float = 0.9  # ... or, by ncu's counters, this fraction of its busiest unit's peak
    min_gain: float = 0.01  # a new best must beat the old one's speedup by this much (relative)


def quick_rules(proposer_kind: str, budgets: Budgets | None = None) -> StopRules:
    """The proposer's rules, with the budgets' early stops (patience, speed of light) where they set them.

    The tuner's coordinate descent expects misses (each direction of each parameter is one), so it gets
    more patience than a model, whose misses mean it is out of ideas."""
    budgets = budgets or Budgets()
    return StopRules(patience=budgets.patience or (6 if proposer_kind == TUNER else 4),
                     speed_of_light=budgets.speed_of_light)


def stop_signal(record: RunRecord, budgets: Budgets, rules: StopRules, *, elapsed_s: float, step_s: float,
                session_iterations: int, parallel: int = 1) -> Terminating | None:
    """Why the run must stop before its next round, or None to go on: the budgets (iterations, wall time, tokens),
    then the early stops (patience, the roofline, the counters' speed of light). Pure: the record and the figures
    the loop measured in, a signal out.

    `elapsed_s`: wall time over every session so far; `step_s`: what the next round will probably take (an
    evaluation cannot be cut short, so one that would end past the time limit is not started);
    `session_iterations`: iterations completed in this session (patience counts this session only: resuming a
    run that ran out of ideas asks for more tries); `parallel`: candidates per round (patience counts rounds)."""
    if record.iterations_used >= budgets.iterations:
        return BudgetExhausted(f"iteration budget spent ({record.iterations_used} of {budgets.iterations})",
                               budget="iterations")
    if budgets.time_limit_s is not None:
        if elapsed_s >= budgets.time_limit_s:
            return BudgetExhausted(f"time limit reached ({elapsed_s:.0f} s of {budgets.time_limit_s:g} s)",
                                   budget="time")
        if elapsed_s + step_s > budgets.time_limit_s:
            return BudgetExhausted(f"time limit: {elapsed_s:.0f} s of {budgets.time_limit_s:g} s spent and a step "
                                   f"takes about {step_s:.0f} s", budget="time")
    spent = tokens_spent(record, budgets)
    if spent is not None:
        return spent
    misses = min(record.since_progress, session_iterations)
    patience = rules.patience * parallel  # rounds of misses, counted in candidates
    if misses >= patience:
        return NoProgress(f"no better candidate in the last {misses} iterations (patience {patience})")
    subject = "the best candidate" if record.best else "the kernel as written"
    position = record.position("best" if record.best else "baseline")
    fraction = (position or {}).get("roofline_fraction")
    if fraction is not None and fraction >= rules.roofline_fraction:
        what = "roofline" if position and position.get("flops_known") else "peak bandwidth (compulsory traffic)"
        return NearRoofline(f"{subject} reaches {fraction:.0%} of its {what}; the stop is at "
                            f"{rules.roofline_fraction:.0%}")
    summary = (record.counters.get(record.best.iteration if record.best else 0) or {}).get("summary") or {}
    light = summary.get("speed_of_light")
    if light is not None and light >= rules.speed_of_light:
        return NearRoofline(f"{subject} runs at {light:.0%} of its speed of light by the hardware's counters "
                            f"({summary.get('class')}, kernel {one_line(str(summary.get('dominant')), 60)}); the "
                            f"stop is at {rules.speed_of_light:.0%}")
    return None


def tokens_spent(record: RunRecord, budgets: Budgets) -> BudgetExhausted | None:
    """The token budget, the run's only check of it: the record's usage is the LLM client's count of every request,
    retries included (each reply event carries it). The loop asks before each round, and again before any further
    model call in a round (another sample, the analyst), so a spent budget sends no new request."""
    spent = int((record.usage or {}).get("total_tokens", 0))
    if budgets.tokens is not None and spent >= budgets.tokens:
        return BudgetExhausted(f"token budget spent ({spent} of {budgets.tokens})", budget="tokens")
    return None


def expected_step_s(record: RunRecord, parallel: int, round_walls: list[float], slots: int) -> float:
    """What the next round will probably take: the mean of the rounds (or, one candidate at a time, of the steps)
    so far, else the first evaluation's time minus the reference run it included (roughly half of it), once per
    wave of the evaluator's `slots`."""
    if parallel > 1:
        if round_walls:
            return sum(round_walls) / len(round_walls)
        return record.baseline_eval_s / 2 * -(-parallel // max(1, slots))
    steps = [it.iteration_s for it in record.completed if it.iteration_s > 0 and it.duplicate_of is None]
    if steps:
        return sum(steps) / len(steps)
    return record.baseline_eval_s / 2
