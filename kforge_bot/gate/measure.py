"""The measurements of one kernel: head against base (or a new kernel against its reference), with one
confirmation run when the first interval straddles the threshold."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kforge_bot.config.policy import GateRule, Policy
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.session import EvaluateFn, EvaluationSession
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.evaluate.wire.shapes import regressions
from kforge_bot.gate.decision import direction_regressions, fmt_change, harness_verdict, result_decision
from kforge_bot.kernelspec import Implementation, KernelSpec, has_own_reference

CONFIRM_FACTOR = 3.0


@dataclass
class Measurement:
    verdict: str
    reason: str
    result: EvalResult | None = None  # the run that decided
    first: EvalResult | None = None  # the first run, when a confirmation decided
    wall_s: float = 0.0
    runs: int = 0
    cacheable: bool = True  # False when the verdict rests on a failure that may be the machine's


def gate_settings(policy: Policy, rule: GateRule, timing_budget_s: float | None = None) -> EvalSettings:
    """How hard the gate looks: the policy's evaluation budget, the rule's confidence, and a precision
    goal a quarter of the threshold (so the interval can clear the bound when it is not close)."""
    return policy.eval_settings(
        "gate",
        rule=rule,
        timing_budget_s=timing_budget_s,
        confidence=rule.confidence,
        target_precision=min(0.005, max(rule.threshold / 4.0, 0.001)),
        # The gate compares a repository's own kernels; calling framework ops is their business.
        allow_framework_fallback=True,
        profile=False,
    )


def confirmation_settings(settings: EvalSettings) -> EvalSettings:
    return replace(settings, timing_budget_s=settings.timing_budget_s * CONFIRM_FACTOR,
                   max_pairs=int(settings.max_pairs * CONFIRM_FACTOR),
                   target_precision=settings.target_precision / 2.0,
                   timeout_s=settings.timeout_s + settings.timing_budget_s * CONFIRM_FACTOR)


def compare(spec: KernelSpec, head: Implementation, base: Implementation | None, kind: str,
            settings: EvalSettings, threshold: float, *, oracle: Implementation | None = None,
            evaluator: EvaluateFn | None = None, references: Any = None,
            seeds: list[int] | None = None) -> Measurement:
    """Measure and judge one kernel: head against base (or, with no base, against its reference).

    `oracle` replaces the spec's reference (the base version, for a kernel that is its own reference).
    The seeds of the first run are reused by a confirmation run, so the reference is computed once;
    `seeds` and `references` let a caller share one reference computation across many decisions
    (the benchmark's repeated decisions on one kernel)."""
    # On a GPU the gate's own evaluations keep a spare pair of workers (evaluate.spares), started as each run begins
    # and held off the device: a confirmation run, or a run again after a disturbed one, finds the head's and the
    # base's workers started. On the CPU a spare starts only as a run ends, and the next run starts at once: no gain
    # (benchmarks/results/gate_decision_cost_cpu.md), so none.
    with EvaluationSession(kind, settings.seed_count(spec.seeds), seeds=seeds, references=references,
                           spares=kind != "cpu", evaluate_fn=evaluator) as session:
        steps = _Steps(session)
        if base is None:
            measurement = steps.new_kernel(spec, head, settings)
        else:
            judged = replace(spec, reference=oracle) if oracle is not None else spec
            measurement = steps.head_against_base(judged, head, base, settings, threshold, oracle is not None)
    measurement.wall_s, measurement.runs = time.monotonic() - steps.started, steps.runs
    return measurement


class _Steps:
    """One decision's steps (a new kernel; or the first run, a failure and whose it is, the confirmation), which
    share the run counter, the seeds and the reference store."""

    def __init__(self, session: EvaluationSession) -> None:
        self.session = session
        self.started = time.monotonic()
        self.runs = 0

    def run(self, spec: KernelSpec, cand: Implementation, against: Implementation,
            how: EvalSettings) -> EvalResult | str:
        """One evaluation, measured once more where its timing was disturbed; or the one-line reason it could not
        run (a reference or inputs that fail)."""
        def once() -> EvalResult:
            self.runs += 1
            return self.session.evaluate(spec, cand, how, baseline=against)

        try:
            return again_if_disturbed(once) if how.measure else once()
        except KforgeError as exc:
            return str(exc)

    def new_kernel(self, spec: KernelSpec, head: Implementation, settings: EvalSettings) -> Measurement:
        """No base version: the head checked against its reference, nothing timed."""
        result = self.run(spec, head, spec.reference, replace(settings, measure=False))
        if isinstance(result, str):
            return Measurement("error", result)
        bad = harness_verdict(result)
        if bad:
            return Measurement(*bad, result=result)
        what = "its reference" if has_own_reference(spec) else "itself (it names no reference)"
        return Measurement("pass", f"new kernel: correct against {what}; no base version to time against",
                           result=result)

    def head_against_base(self, judged: KernelSpec, head: Implementation, base: Implementation,
                          settings: EvalSettings, threshold: float, base_is_oracle: bool) -> Measurement:
        """The first run decides unless its interval straddles the threshold; then a longer confirmation run."""
        result = self.run(judged, head, base, settings)
        if isinstance(result, str):
            # The reference worker runs no head code: the head's reference or inputs, or the base as the oracle
            # of a kernel that is its own reference, failed on their own. Nothing judges the head then.
            whose = "the base version (this kernel's oracle)" if base_is_oracle else "the head's reference or inputs"
            return Measurement("error", f"{whose} fail: {result}", cacheable=not base_is_oracle)
        base_failed = _base_failure(result)
        if base_failed:
            return Measurement("error", base_failed, result=result, cacheable=False)
        if result.verdict == "inconclusive":
            return _inconclusive(f"disturbed twice: {result.reason}", result, None, settings)
        bad = harness_verdict(result)
        if bad:
            return Measurement(*bad, result=result)
        decision = _decision(result, threshold)
        if decision not in ("uncertain", "unmeasured"):
            return Measurement(decision, _timing_reason(decision, result, threshold), result=result)
        return self.confirmation(judged, head, base, settings, threshold, result)

    def confirmation(self, judged: KernelSpec, head: Implementation, base: Implementation, settings: EvalSettings,
                     threshold: float, first: EvalResult) -> Measurement:
        confirm = self.run(judged, head, base, confirmation_settings(settings))
        if isinstance(confirm, str):
            return Measurement("error", f"confirmation run: {confirm}", result=first)
        base_failed = _base_failure(confirm)
        if base_failed:
            return Measurement("error", f"confirmation run: {base_failed}", result=confirm, first=first,
                               cacheable=False)
        if confirm.verdict == "inconclusive":
            return _inconclusive(f"confirmation run disturbed twice: {confirm.reason}", confirm, first, settings)
        bad = harness_verdict(confirm)
        if bad:
            return Measurement(bad[0], f"confirmation run: {bad[1]}", result=confirm, first=first)
        decision = _decision(confirm, threshold)
        if decision == "unmeasured":
            # Passing what could not be timed would let any slowdown through; failing says what to fix.
            note = confirm.details.get("speedup_ci_note") or "no timing came back"
            return Measurement("error", f"could not be timed, even with a confirmation run of "
                                        f"{confirmation_settings(settings).timing_budget_s:g} s ({note}); raise the "
                                        "policy's evaluation.timing_budget_s", result=confirm, first=first,
                               cacheable=False)
        if decision == "uncertain":
            # An interval that still holds both a regression and none decides nothing: passing it let a kernel
            # anywhere from 0.7x to 7.7x through.
            open_sets = [p for p in confirm.per_shape if not p.informational and p.status == "uncertain"]
            which = (" on " + ", ".join(f"{p.label} ({fmt_change(p.speedup, p.ci)})" for p in open_sets)
                     if len(confirm.per_shape) > 1 and open_sets else "")
            return _inconclusive(f"not resolved at the {threshold:.1%} threshold after a confirmation run{which} "
                                 f"({fmt_change(confirm.speedup, confirm.speedup_ci)})", confirm, first, settings)
        return Measurement(decision, f"confirmed: {_timing_reason(decision, confirm, threshold)}", result=confirm,
                           first=first)


def again_if_disturbed(run_one: Callable[[], EvalResult]) -> EvalResult:
    """An evaluation, measured once more where its timing was disturbed (`inconclusive`): the second's result, with
    the first's reason as `details.disturbed_before`. The gate's runs and `track`'s points are taken so."""
    result = run_one()
    if result.verdict != "inconclusive":
        return result
    again = run_one()
    again.details["disturbed_before"] = result.reason
    return again


def _inconclusive(why: str, result: EvalResult, first: EvalResult | None, settings: EvalSettings) -> Measurement:
    """A timing that decided nothing: `inconclusive` (failing), or a pass where the policy's gate.inconclusive says
    so; never cached, since another run on a quieter machine may decide."""
    if settings.inconclusive == "pass":
        return Measurement("pass", f"inconclusive, passed by the policy's gate.inconclusive: {why}", result=result,
                           first=first, cacheable=False)
    return Measurement("inconclusive", f"{why}; fails the gate (the policy's gate.inconclusive: pass lets it through)",
                       result=result, first=first, cacheable=False)


def _base_failure(result: EvalResult) -> str | None:
    """The reason, where the comparison crashed or hung in the base's code (building it, or a call of it).

    Charged to the base, never to the head, and never resolved by running the head alone: a head that could tell
    the comparison from a run of its own would fail only in the comparison and pass alone. The head is not
    judged (the head shares the device with the base, so the head may be what broke it: the device memory the base
    ran out of, say): an `error` a maintainer looks at, not a pass."""
    if result.verdict not in ("crash", "timeout") or result.details.get("failed_side") != "baseline":
        return None
    return (f"the base version failed beside the head ({result.reason}); the head could not be compared against "
            "it, and is not judged (a base that fails here needs a maintainer: re-run, or fix the base first)")


def _decision(result: EvalResult, threshold: float) -> str:
    """The decision on the shape sets (decision.result_decision), or a regression where one direction of a backward
    kernel alone is one."""
    decision = result_decision(result, threshold)
    return "regression" if decision != "regression" and direction_regressions(result, threshold) else decision


def _timing_reason(decision: str, result: EvalResult, threshold: float) -> str:
    change = fmt_change(result.speedup, result.speedup_ci)
    confidence = result.details.get("confidence", 0.95)
    slower = direction_regressions(result, threshold)
    if decision == "regression" and slower and result_decision(result, threshold) != "regression":
        figures = result.details["directions"]
        which = ", ".join(f"the {d} ({fmt_change(figures[d]['speedup'], figures[d]['speedup_ci'])})" for d in slower)
        return (f"{which} slower than the base by more than {threshold:.1%} ({confidence:.0%} interval); "
                f"forward+backward {change}")
    slow = regressions(result.per_shape)
    if decision == "regression" and slow and len(result.per_shape) > 1:
        sets = "; ".join(f"{p.label} {fmt_change(p.speedup, p.ci)}, threshold {p.threshold:.1%}" for p in slow)
        return (f"slower than the base on {len(slow)} of {len(result.per_shape)} shape sets ({sets}; "
                f"{confidence:.0%} intervals); geometric mean over the shape sets {change}")
    if decision == "regression":
        return f"slower than the base by more than {threshold:.1%} ({change}, {confidence:.0%} interval)"
    if decision == "improved":
        return f"faster than the base by more than {threshold:.1%} ({change})"
    return f"within the {threshold:.1%} threshold ({change})"

