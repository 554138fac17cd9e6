"""What a result says it checked (kforge_bot.evaluate.comparison): the checks its plan made, and no other."""

from __future__ import annotations

from pathlib import Path

from kforge_bot.evaluate.comparison import _checks_made
from kforge_bot.evaluate.wire.plan import Plan
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import load_spec

SOFTMAX = Path(__file__).parents[1] / "data" / "kb" / "softmax.py"
AFTER_TIMING = {"timed outputs", "elements of each timed input set changed", "values moved between timed buffers"}


def _plan(settings: EvalSettings, seeds: list[int]) -> Plan:
    spec = load_spec(SOFTMAX)
    return Plan(role="candidate", target="cpu", spec=spec, baseline=spec.baseline, candidate=None, settings=settings,
                seeds=seeds, out_dir=Path("/tmp"))


def test_an_untimed_check_claims_no_check_after_timing_and_one_seed_no_refilled_buffers() -> None:
    timed = set(_checks_made(_plan(EvalSettings(), [1, 2])))
    assert AFTER_TIMING | {"same buffers new values", "earlier outputs not overwritten"} <= timed
    untimed = set(_checks_made(_plan(EvalSettings(measure=False), [1, 2])))
    assert not untimed & AFTER_TIMING and "same buffers new values" in untimed
    one_seed = set(_checks_made(_plan(EvalSettings(measure=False), [1])))
    assert "same buffers new values" not in one_seed and "inputs unchanged" in one_seed


def test_no_check_after_timing_is_claimed_where_none_ran_and_no_changed_elements_where_nothing_could_change() -> None:
    plan = _plan(EvalSettings(), [1, 2])
    assert not set(_checks_made(plan, timed=False)) & AFTER_TIMING  # the candidate was never timed
    kept = set(_checks_made(plan, timed=True, nothing_to_change=True))  # every float input kept, or none at all
    assert "elements of each timed input set changed" not in kept and "timed outputs" in kept
