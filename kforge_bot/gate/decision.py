"""The gate's decision rule (see kforge_bot/gate/__init__.py) as pure functions of plain data, and how a
change and a threshold are written in its reports."""

from __future__ import annotations

from collections.abc import Sequence

from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.evaluate.wire.shapes import regression_bound as regression_bound  # the rule's bound, re-exported
from kforge_bot.evaluate.wire.shapes import shape_status

VERDICTS = ("pass", "improved", "regression", "incorrect", "error", "spec-changed", "inconclusive", "skipped")
# spec-changed: the change edits the kernel's own test (kforge_bot/gate/base_spec.py) and no maintainer has
# approved that with the policy's trust.spec_change_label.
# inconclusive: the timing could not decide (disturbed twice, or still straddling the threshold after the confirmation
# run); it fails unless the policy's gate.inconclusive is `pass`, and is never cached.
FAILING = ("regression", "incorrect", "error", "spec-changed", "inconclusive")
# Decisions that depend only on content and settings: safe to reuse. Errors are not cached, since
# a timeout or a missing package can come from the machine rather than the code.
CACHEABLE = ("pass", "improved", "regression", "incorrect", "spec-changed")
# Measured verdicts from the strictest down: where a kernel is judged under two tests (the base branch's tip and the
# branch point, when they differ), the stricter stands.
STRICTNESS = ("incorrect", "error", "regression", "pass", "improved")


def stricter(first: str, second: str) -> bool:
    """Whether verdict `first` is stricter than `second` (unknown verdicts rank last)."""
    rank = {v: i for i, v in enumerate(STRICTNESS)}
    return rank.get(first, len(rank)) < rank.get(second, len(rank))


def timing_decision(speedup_ci: Sequence[float] | None, threshold: float) -> str:
    """One interval against a threshold: 'regression' | 'uncertain' (straddles the bound: confirm) | 'improved' |
    'pass', or 'unmeasured' when the run produced no interval (too few pairs in the budget: confirm too)."""
    return shape_status(speedup_ci, threshold)


def result_decision(result: EvalResult, threshold: float) -> str:
    """The gate's decision on a timed result, shape set by shape set (evaluate.wire.shapes): a regression when any
    shape set the policy counts regressed (each at its own threshold), a confirmation when any straddles or went
    unmeasured, improved when the headline (the geometric mean) is faster than the threshold, else pass. A shape
    set the policy names informational never decides; where every set is, the headline can only pass or improve."""
    if not result.per_shape:  # a result with no shape sets (written before they were kept): its headline alone
        return timing_decision(result.speedup_ci, threshold)
    counted = {p.status for p in result.per_shape if not p.informational}
    for decision in ("regression", "unmeasured", "uncertain"):
        if decision in counted:
            return decision
    return "improved" if timing_decision(result.speedup_ci, threshold) == "improved" else "pass"


def direction_regressions(result: EvalResult, threshold: float) -> list[str]:
    """A kernel with a backward: the directions (forward, backward) that alone are a regression at `threshold`,
    where the headline (forward+backward) may not be: a slower backward must not hide in the sum."""
    directions = result.details.get("directions") or {}
    return [name for name in ("forward", "backward")
            if timing_decision((directions.get(name) or {}).get("speedup_ci"), threshold) == "regression"]


def harness_verdict(result: EvalResult) -> tuple[str, str] | None:
    """The gate's verdict for a harness result that is not a clean pass, else None."""
    if result.verdict == "pass":
        return None
    if result.verdict == "incorrect":
        return "incorrect", result.reason
    if result.verdict == "rejected":
        if result.reason.startswith("static check"):
            return "error", f"the harness refused to run it: {result.reason}"
        return "incorrect", f"rejected by the harness: {result.reason}"
    if result.verdict == "compile_error":
        return "error", f"does not load or build: {result.reason}"
    if result.verdict == "timeout":
        return "error", result.reason
    return "error", f"crashed: {result.reason}"


def exit_code(verdicts: Sequence[str], unmeasured_required: int = 0, require_all_targets: bool = False) -> int:
    """1 if a kernel failed, or (only with `require_all_targets`) a required target went unmeasured."""
    if any(v in FAILING for v in verdicts):
        return 1
    return 1 if require_all_targets and unmeasured_required > 0 else 0


def fmt_threshold(threshold: float | None, target: str = "") -> str:
    """'5% (cpu)', '2.5% (cuda)'."""
    if threshold is None:
        return "-"
    return f"{threshold * 100:.4g}%" + (f" ({target})" if target else "")


def fmt_change(speedup: float | None, ci: Sequence[float] | None) -> str:
    """Head time relative to base, the one way the gate writes a change (the headline's and each shape set's):
    1/speedup - 1, so for the headline the geometric mean of the shape sets' head/base, which is also the ratio
    of the geometric means of their medians that the report prints beside it (up to the pairing).
    '+3.1% (+2.8% to +3.4%)', '19.8x slower (19.1x-20.6x)'."""
    if speedup is None or speedup <= 0:
        return "n/a"
    ratio = 1.0 / speedup
    lo_r, hi_r = (1.0 / ci[1], 1.0 / ci[0]) if ci and ci[0] > 0 and ci[1] > 0 else (None, None)
    if ratio >= 2.0:
        interval = f" ({lo_r:.1f}x-{hi_r:.1f}x)" if lo_r is not None else ""
        return f"{ratio:.1f}x slower{interval}"
    if ratio <= 0.5:
        interval = f" ({1 / hi_r:.1f}x-{1 / lo_r:.1f}x)" if lo_r is not None and hi_r is not None else ""
        return f"{1 / ratio:.1f}x faster{interval}"

    def pct(r: float) -> str:
        return f"{(r - 1.0) * 100:+.1f}%"

    interval = f" ({pct(lo_r)} to {pct(hi_r)})" if lo_r is not None and hi_r is not None else ""
    return f"{pct(ratio)}{interval}"

