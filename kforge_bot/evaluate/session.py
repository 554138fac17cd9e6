"""One command's evaluations and what they share (check, the gate's decisions and optimize's candidates each built
these apart before).

An EvaluationSession holds the target, chosen once; one list of secret seeds, so that one run of the reference serves
every candidate, compiled baseline and confirmation run of the session; the store that keeps the reference's
outputs; and, where the next evaluation follows soon, spare workers started ahead of it (evaluate.spares).
`session.evaluate` is api.evaluate with those filled in; closing the session stops its spares and frees the store,
where the session made it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kforge_bot.evaluate.api import evaluate, new_seeds
from kforge_bot.evaluate.references import ReferenceStore
from kforge_bot.evaluate.spares import SpareWorkers
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec
from kforge_bot.targets import TargetChoice

EvaluateFn = Callable[..., EvalResult]  # api.evaluate's signature: a test's scripted one, a benchmark's variant


class EvaluationSession:
    """`seed_count`: seeds to draw (`seeds` given: those instead, a caller sharing them wider). `references`: a store
    the caller owns and frees (else the session's own). `spares`: keep spare workers, only with api.evaluate itself
    (a caller's `evaluate_fn` starts its own workers or none)."""

    def __init__(self, target: str | TargetChoice, seed_count: int = 1, *, seeds: list[int] | None = None,
                 references: ReferenceStore | None = None, spares: bool = False,
                 evaluate_fn: EvaluateFn | None = None) -> None:
        self.target = target
        self.seeds = list(seeds) if seeds else new_seeds(max(seed_count, 1))
        self._own_store = references is None
        self.references = references if references is not None else ReferenceStore()
        self.spares = SpareWorkers() if spares and evaluate_fn is None else None
        self._evaluate = evaluate_fn or evaluate

    def evaluate(self, spec: KernelSpec, candidate: Implementation, settings: EvalSettings,
                 **kwargs: Any) -> EvalResult:
        """api.evaluate on the session's target, with its seeds, its reference store and its spares."""
        if self.spares is not None:
            kwargs["spares"] = self.spares
        return self._evaluate(spec, candidate, self.target, settings, seeds=self.seeds, references=self.references,
                              **kwargs)

    def close(self) -> None:
        if self.spares is not None:
            self.spares.close()
        if self._own_store:
            self.references.cleanup()

    def __enter__(self) -> EvaluationSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
