"""The evaluation harness: `evaluate(spec, candidate, target) -> EvalResult`."""

from kforge_bot.evaluate.result import VERDICTS, EvalResult, EvalSettings, TimingStats

__all__ = ["VERDICTS", "EvalResult", "EvalSettings", "TimingStats", "evaluate", "ReferenceStore"]


def __getattr__(name: str):
    # The worker imports submodules of this package; keep the parent-side machinery out of its start-up.
    if name == "evaluate":
        from kforge_bot.evaluate.api import evaluate

        return evaluate
    if name == "ReferenceStore":
        from kforge_bot.evaluate.references import ReferenceStore

        return ReferenceStore
    raise AttributeError(name)
