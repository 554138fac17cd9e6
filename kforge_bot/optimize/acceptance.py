"""When a candidate becomes the new best: correct and faster than the kernel as written with confidence (the whole
speedup interval above 1; where the policy asks for compiled baselines, than the faster of it and them), and better
than the best so far by the stop rules' `min_gain`."""

from __future__ import annotations

from kforge_bot.evaluate.baselines import CompiledBaseline, against_baselines, beats_every_baseline
from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.optimize.record import RunRecord


def with_baselines(record: RunRecord, result: EvalResult) -> EvalResult:
    """A correct, timed result also says how it compares with each compiled baseline the run measured
    (details.baselines)."""
    if record.compiled_baselines and result.correct and result.details.get("timing"):
        compiled = {k: CompiledBaseline.from_dict(v) for k, v in record.compiled_baselines.items()}
        result.details["baselines"] = against_baselines(result, compiled)
    return result


def accepts(record: RunRecord, result: EvalResult, min_gain: float) -> bool:
    """Whether `result` is the run's new best (see the module docstring); it says what it was accepted against
    (details.accepted_against)."""
    faster, against = beats_every_baseline(result)
    result.details["accepted_against"] = against
    if not faster or result.speedup is None:
        return False
    best = record.best
    return best is None or best.speedup is None or result.speedup > best.speedup * (1.0 + min_gain)
