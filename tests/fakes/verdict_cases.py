"""Hostile candidates judged in bulk through the full evaluate() on the CPU, for the reward-hack tests
(tests/evaluate/test_adversarial.py, tests/evaluate/test_gpumode_problems.py): a table of cases, each
(settings, verdict, the regex its reason must match), evaluated two at a time, and the check of one verdict."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor

from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.references import ReferenceStore
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec

SEEDS = [11, 22]
Case = tuple[EvalSettings, str, str]  # settings, verdict (a regex: "incorrect|rejected" allows either), reason regex


def judging_settings(timeout_s: float) -> tuple[EvalSettings, EvalSettings, EvalSettings]:
    """(check, profiled, timed). Correctness only and no profile where neither matters: each worker start costs
    seconds on a 2-core CI box. The framework-fallback rule reads the profile; some hacks wait for the timing."""
    return (EvalSettings(seeds=2, measure=False, profile=False, timeout_s=timeout_s),
            EvalSettings(seeds=2, measure=False, timeout_s=timeout_s),
            EvalSettings(seeds=2, timing_budget_s=0.3, profile=False, timeout_s=timeout_s))


def judge_all(spec: KernelSpec, cases: dict[str, Case], candidate: Callable[[str], Implementation],
              store: ReferenceStore, *, first: Collection[str] = ()) -> dict[str, EvalResult]:
    """Every case's candidate evaluated on the CPU, two at a time, the ones named in `first` (a hang, so the others
    run beside it rather than after it) started first."""
    # References first, one per settings: no candidate ever runs while a reference is on disk.
    for settings in {id(s): s for s, _, _ in cases.values()}.values():
        store.ensure(spec, "cpu", SEEDS, settings, None)
    order = sorted(cases, key=lambda name: (name not in first, name))
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(evaluate, spec, candidate(name), "cpu", cases[name][0], seeds=SEEDS,
                                     references=store)
                   for name in order}
        return {name: future.result() for name, future in futures.items()}


def assert_verdict(result: EvalResult, verdict: str, pattern: str) -> None:
    """The verdict is `verdict` (a regex), the reason matches `pattern`, and a rejected kernel reports no speed."""
    assert re.fullmatch(verdict, result.verdict), f"{result.verdict}: {result.reason}"
    assert re.search(pattern, result.reason), f"reason {result.reason!r} does not match {pattern!r}"
    assert result.correct == (result.verdict == "pass")
    if result.verdict != "pass":
        assert result.speedup is None and result.speedup_ci is None  # no speed is reported for a rejected kernel
