"""The loop's evaluator: one kernel's evaluation session (evaluate.session: one reference store, one seed list, spare
workers), the result cache and (optionally) an evaluation pool. Pure plumbing: it decides no verdict (the
harness does) and knows nothing of proposals or the trajectory (the loop does)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from kforge_bot.cache import EVAL_CACHEABLE, cache_key, evaluation_material
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.baselines import CompiledBaseline, measure_compiled
from kforge_bot.evaluate.references import Progress
from kforge_bot.evaluate.session import EvaluateFn, EvaluationSession
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.optimize.protocols import Measured
from kforge_bot.kernelspec import Implementation, KernelSpec, candidate_language



class HarnessEvaluator:
    """`evaluate` with one reference store and one seed list for the whole session, timed.

    With a `pool` (kforge_bot.scaleout: local slots or Ray) evaluations run there, several at once through
    `submit`; with a `cache` (kforge_bot.cache.ResultCache) and the target's `fingerprint`, a result measured
    before for the same content on the same hardware is reused and marked `cached`."""

    def __init__(self, spec: KernelSpec, target: str, settings: EvalSettings, *, seeds: list[int] | None = None,
                 evaluate_fn: EvaluateFn | None = None, pool: Any = None, cache: Any = None,
                 fingerprint: Any = None, languages: Sequence[str] | None = None) -> None:
        self.spec = spec
        self.target = target
        self.settings = settings
        # Candidates come one after another: each one's worker starts while the loop records and proposes (spares).
        self.session = EvaluationSession(target, settings.seed_count(spec.seeds), seeds=seeds, spares=True,
                                         evaluate_fn=evaluate_fn)
        self.seeds = self.session.seeds  # the pool's jobs carry them
        self.progress: Progress | None = None
        self.pool = pool
        self.cache = cache if fingerprint is not None else None
        self.fingerprint = fingerprint
        self.hits = 0
        self.misses = 0
        self.languages = tuple(languages) if languages is not None else None  # the policy's; None: any

    def __call__(self, candidate: Implementation) -> Measured:
        return self.submit(candidate).result()

    @property
    def slots(self) -> int:
        """Evaluations that run at once: the pool's slots, else one."""
        return int(getattr(self.pool, "size", 1) or 1)

    def _key(self, candidate: Implementation) -> tuple[str, dict[str, Any]] | None:
        if self.cache is None:
            return None
        material = evaluation_material(self.spec, candidate, self.settings, self.fingerprint)
        return cache_key(material), material

    def submit(self, candidate: Implementation) -> Future[Measured]:
        """A future of (result, seconds inside evaluate); a cache hit is done at once, 0 s."""
        out: Future[Measured] = Future()
        refused = self._refused_language(candidate)
        if refused is not None:
            out.set_result(Measured(refused, 0.0))
            return out
        keyed = self._key(candidate)
        if keyed is not None:
            hit = self.cache.get(keyed[0])
            if hit is not None:
                self.hits += 1
                result = EvalResult.from_dict(hit)
                result.cached = True
                result.details["cache_key"] = keyed[0]
                out.set_result(Measured(result, 0.0))
                return out
            self.misses += 1

        def store(result: EvalResult) -> None:
            if keyed is not None and result.verdict in EVAL_CACHEABLE and not result.cached:
                try:
                    self.cache.put(keyed[0], keyed[1], result.to_dict())
                except (KforgeError, OSError):
                    pass  # a cache that cannot be written costs speed, never the run

        if self.pool is None:
            started = time.monotonic()
            try:
                result = self.session.evaluate(self.spec, candidate, self.settings, progress=self.progress)
            except BaseException as exc:  # noqa: BLE001 - the caller's .result() raises it
                out.set_exception(exc)
                return out
            store(result)
            out.set_result(Measured(result, time.monotonic() - started))
            return out

        inner = self.pool.submit(self.spec, candidate, self.settings, self.seeds, progress=self.progress)

        def done(f: Future[Any]) -> None:
            if f.cancelled():  # the pool was aborted before a slot took this job
                out.cancel()
                return
            exc = f.exception()
            if exc is not None:
                out.set_exception(exc)
                return
            pooled = f.result()
            pooled.result.details.setdefault("pool", {"slot": pooled.slot, "device": pooled.device,
                                                      "queue_s": round(pooled.queue_s, 3),
                                                      "prepare": pooled.prepare, "prepare_s": pooled.prepare_s})
            store(pooled.result)
            out.set_result(Measured(pooled.result, pooled.eval_s))

        inner.add_done_callback(done)
        return out

    def compiled_baselines(self, kinds: Sequence[str]) -> dict[str, CompiledBaseline]:
        """The kernel as written under torch.compile (each kind), measured against it once for the session, with the
        session's seeds and reference outputs (evaluate.baselines)."""
        return measure_compiled(self.spec, self.spec.baseline, tuple(kinds), self.session.evaluate, self.settings,
                                progress=self.progress)

    def _refused_language(self, candidate: Implementation) -> EvalResult | None:
        if self.languages is None or candidate == self.spec.baseline:
            return None  # the kernel as written is measured whatever it is written in; candidates are not
        language = candidate_language(self.spec, candidate)
        if language in self.languages:
            return None
        return EvalResult(verdict="rejected", target=self.target,
                          reason=f"written in {language}, which the policy does not allow (languages: "
                                 f"{', '.join(self.languages)})", details={"language": language})

    def close(self) -> None:
        self.session.close()
