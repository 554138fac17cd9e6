"""The loop's evaluator (kforge_bot.optimize.evaluator): the policy's languages, the pool's futures and the
result cache, around `evaluate` (here a stand-in that counts what it is asked to run)."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

from kforge_bot.targets.fingerprint import TargetFingerprint
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.optimize.evaluator import HarnessEvaluator
from kforge_bot.kernelspec import Implementation, load_spec

SETTINGS = EvalSettings(seeds=2, timing_budget_s=0.5, timeout_s=120)
KB = load_spec(Path(__file__).parents[1] / "data" / "kb" / "softmax.py")


def counting(ran: list[str]) -> Any:
    def evaluate_fn(spec: Any, candidate: Implementation, *args: Any, **kwargs: Any) -> EvalResult:
        ran.append(candidate.filename)
        return EvalResult(verdict="pass", reason="ok", target="cpu", speedup=1.5)
    return evaluate_fn


def test_the_policys_languages_bound_what_a_candidate_may_be_written_in() -> None:
    """Policy `languages`: a candidate in another language is rejected before anything runs; the kernel as
    written is measured whatever it is written in."""
    ran: list[str] = []
    evaluator = HarnessEvaluator(KB, "cpu", SETTINGS, evaluate_fn=counting(ran), languages=("triton", "cuda"))
    torch_candidate = Implementation("import torch\nclass ModelNew(torch.nn.Module): pass\n", "ModelNew", "t.py")
    triton_candidate = Implementation("import torch\nimport triton\nclass ModelNew(torch.nn.Module): pass\n",
                                      "ModelNew", "tr.py")
    refused, seconds = evaluator(torch_candidate)
    assert refused.verdict == "rejected" and seconds == 0.0
    assert refused.reason == "written in torch, which the policy does not allow (languages: triton, cuda)"
    assert evaluator(triton_candidate)[0].verdict == "pass" and evaluator(KB.baseline)[0].verdict == "pass"
    assert ran == ["tr.py", KB.baseline.filename]
    evaluator.close()


class Store:
    """A result cache in memory (kforge_bot.cache.ResultCache's get/put)."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def put(self, key: str, material: dict[str, Any], result: dict[str, Any]) -> None:
        self.entries[key] = result


def test_a_result_measured_before_is_reused_marked_and_costs_nothing() -> None:
    ran: list[str] = []
    store = Store()
    evaluator = HarnessEvaluator(KB, "cpu", SETTINGS, evaluate_fn=counting(ran), cache=store,
                          fingerprint=TargetFingerprint("cpu", "Test CPU A", "2.13.0"))
    candidate = KB.candidate_from_source(KB.baseline.source + "\n# the same kernel, once more\n")
    first, seconds = evaluator(candidate)
    assert not first.cached and seconds >= 0.0 and len(store.entries) == 1
    again, seconds = evaluator(candidate)
    assert again.cached and seconds == 0.0 and again.speedup == 1.5 and "cache_key" in again.details
    assert (evaluator.hits, evaluator.misses, len(ran)) == (1, 1, 1)
    evaluator.close()


def test_with_a_pool_the_evaluation_is_a_future_carrying_where_it_ran() -> None:
    class Pooled:
        def __init__(self, result: EvalResult) -> None:
            self.result, self.slot, self.device, self.queue_s = result, 1, "cpu", 0.25
            self.prepare, self.prepare_s, self.eval_s = None, 0.0, 3.0

    class Pool:
        def __init__(self) -> None:
            self.jobs: list[Future[Pooled]] = []

        def submit(self, spec: Any, candidate: Implementation, settings: Any, seeds: Any, progress: Any = None
                   ) -> Future[Pooled]:
            self.jobs.append(Future())
            return self.jobs[-1]

    pool = Pool()
    evaluator = HarnessEvaluator(KB, "cpu", SETTINGS, evaluate_fn=counting([]), pool=pool)
    future = evaluator.submit(KB.candidate_from_source(KB.baseline.source + "\n# v2\n"))
    assert not future.done()  # the loop proposes the next candidate meanwhile
    pool.jobs[0].set_result(Pooled(EvalResult(verdict="pass", reason="ok", target="cpu")))
    result, seconds = future.result()
    assert seconds == 3.0 and result.details["pool"] == {"slot": 1, "device": "cpu", "queue_s": 0.25,
                                                         "prepare": None, "prepare_s": 0.0}
    evaluator.close()


def test_the_cache_keeps_only_undisturbed_results_each_with_its_conditions(tmp_path: Path) -> None:
    """A timing the conditions called disturbed (`inconclusive`) is never stored: measured under load, it would be
    replayed on a quiet machine. What is stored carries the conditions it was measured in."""
    from kforge_bot.cache import ResultCache

    conditions = {"per_shape": [{"shape_set": 0, "baseline": {"preempted_share": 0.9}, "disturbed": "load"}],
                  "disturbed": "load", "threads": "baseline 0.6 threads busy, candidate 0.6 threads busy"}
    verdicts = ["inconclusive", "pass"]

    def evaluate_fn(spec: Any, candidate: Implementation, *args: Any, **kwargs: Any) -> EvalResult:
        verdict = verdicts.pop(0)
        shown = conditions if verdict == "inconclusive" else {**conditions, "disturbed": None}
        return EvalResult(verdict=verdict, reason="timing disturbed: load" if verdict == "inconclusive" else "ok",
                          target="cpu", speedup=1.5, details={"conditions": shown})

    cache = ResultCache(tmp_path / "cache")
    evaluator = HarnessEvaluator(KB, "cpu", SETTINGS, evaluate_fn=evaluate_fn, cache=cache,
                          fingerprint=TargetFingerprint("cpu", "Test CPU A", "2.13.0"))
    assert evaluator(KB.baseline)[0].verdict == "inconclusive"
    assert len(cache) == 0
    assert evaluator(KB.baseline)[0].verdict == "pass"  # measured again, undisturbed: stored
    assert len(cache) == 1
    again, seconds = evaluator(KB.baseline)
    assert again.cached and seconds == 0.0 and again.details["conditions"]["disturbed"] is None
    assert again.details["conditions"]["threads"].startswith("baseline 0.6 threads busy")
    evaluator.close()
