"""The evaluation harness: `evaluate(spec, candidate, target) -> EvalResult`."""

from kforge_bot.evaluate.result import VERDICTS, EvalResult, EvalSettings, TimingStats

__all__ = ["VERDICTS", "EvalResult", "EvalSettings", "TimingStats", "evaluate", "ReferenceStore"]


def __getattr__(name: str):
    # The worker imports submodules of this package; keep the parent-side machinery out of its start-up.
    if name in ("evaluate", "ReferenceStore"):
        from kforge_bot.evaluate import api

        return getattr(api, name)
    raise AttributeError(name)
