"""The gate's decision rule (see kforge_bot/gate/__init__.py) as pure functions of plain data, and how a
change and a threshold are written in its reports."""

from __future__ import annotations

from collections.abc import Sequence

from kforge_bot.evaluate.result import EvalResult

VERDICTS = ("pass", "improved", "regression", "incorrect", "error", "skipped")
FAILING = ("regression", "incorrect", "error")
# Decisions that depend only on content and settings: safe to reuse. Errors are not cached, since
# a timeout or a missing package can come from the machine rather than the code.
CACHEABLE = ("pass", "improved", "regression", "incorrect")


def regression_bound(threshold: float) -> float:
    """Speedup below which the head is slower than the base by more than `threshold`."""
    return 1.0 / (1.0 + threshold)


def timing_decision(speedup_ci: Sequence[float] | None, threshold: float) -> str:
    """'regression' | 'uncertain' (straddles the bound: confirm) | 'improved' | 'pass', or
    'unmeasured' when the run produced no interval (too few pairs in the budget: confirm too)."""
    if not speedup_ci:
        return "unmeasured"
    low, high = float(speedup_ci[0]), float(speedup_ci[1])
    bound = regression_bound(threshold)
    if high < bound:
        return "regression"
    if low < bound:
        return "uncertain"
    if low > 1.0 + threshold:
        return "improved"
    return "pass"


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
    """Head time relative to base: '+3.1% (+2.8% to +3.4%)', '19.8x slower (19.1x-20.6x)'."""
    if speedup is None or speedup <= 0:
        return "n/a"
    ratio = 1.0 / speedup
    lo_r, hi_r = (1.0 / ci[1], 1.0 / ci[0]) if ci and ci[0] > 0 and ci[1] > 0 else (None, None)
    if ratio >= 2.0:
        interval = f" ({lo_r:.1f}x-{hi_r:.1f}x)" if lo_r is not None else ""
        return f"{ratio:.1f}x slower{interval}"

    def pct(r: float) -> str:
        return f"{(r - 1.0) * 100:+.1f}%"

    interval = f" ({pct(lo_r)} to {pct(hi_r)})" if lo_r is not None and hi_r is not None else ""
    return f"{pct(ratio)}{interval}"

