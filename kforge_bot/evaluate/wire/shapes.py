"""Speedups per shape set, the headline that combines them, and the one rule that says which shape set regressed.

A kernel is timed on each of its shape sets separately; each set's speedup is the median of its per-pair ratios
(baseline / candidate) with a distribution-free interval (kforge_bot.evaluate.wire.stats). Pooling the pairs of all
sets into one median hid a regression: a head 5-7x faster on one set and 7x slower on another read as "+10.6%".
So every command reads the sets one by one (`ShapeSpeedup`), and the rule is the same everywhere (`shape_status`):
a shape set whose whole interval lies below 1/(1+threshold) is a regression (the gate fails it, optimize does not
accept the candidate, check's reason names it), unless the policy names it informational.

The headline is the geometric mean of the sets' speedups (every set weighs the same, and a 2x gain on one set and
a 2x loss on another cancel, as they should). Its interval combines the sets' on the log scale (`combine`): each
set's interval gives a lower and an upper half-width of its log speedup; the headline's half-widths are the root of
the sum of their squares over the number of sets (the delta method for a mean of independent estimates, each side
apart since the order-statistic intervals are not symmetric). The judge combines the sets' within-run intervals
so, then widens the result once by the systematic floor (an error the sets share, not to be averaged away).
Chosen over a bootstrap of the pairs because it is deterministic (the same samples give the same verdict), costs
nothing, and works from the distribution-free intervals the sets already have. It is approximate where a set's
interval is very lopsided, and it assumes the sets' errors independent (they are timed one after another).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

STATUSES = ("regression", "uncertain", "improved", "pass", "unmeasured")

DEFINITION = ("speedup = the geometric mean over the shape sets of each set's median per-pair ratio (baseline / "
              "candidate, each pair timed back to back); its interval combines the sets' intervals on the log scale "
              "(delta method); a shape set whose whole interval is below 1/(1+threshold) is a regression")


def regression_bound(threshold: float) -> float:
    """Speedup below which the candidate is slower than the baseline by more than `threshold`."""
    return 1.0 / (1.0 + threshold)


def shape_status(ci: Sequence[float] | None, threshold: float) -> str:
    """'regression' (the whole interval below the bound) | 'uncertain' (it straddles the bound) | 'improved' (the
    whole interval above 1+threshold) | 'pass', or 'unmeasured' (no interval: too few pairs)."""
    if not ci:
        return "unmeasured"
    low, high = float(ci[0]), float(ci[1])
    bound = regression_bound(threshold)
    if high < bound:
        return "regression"
    if low < bound:
        return "uncertain"
    if low > 1.0 + threshold:
        return "improved"
    return "pass"


@dataclass
class ShapeSpeedup:
    """One shape set's timing: its speedup (median per-pair ratio), interval, medians and the rule it is judged by."""

    shape_set: int
    shape: dict[str, Any]
    speedup: float
    ci: tuple[float, float] | None
    baseline_ms: float
    candidate_ms: float
    pairs: int
    threshold: float = 0.0
    informational: bool = False

    @property
    def status(self) -> str:
        return shape_status(self.ci, self.threshold)

    @property
    def regressed(self) -> bool:
        return not self.informational and self.status == "regression"

    @property
    def label(self) -> str:
        """'shape set 1 (n=16)'."""
        params = ", ".join(f"{k}={v}" for k, v in self.shape.items())
        return f"shape set {self.shape_set}" + (f" ({params})" if params else "")

    def speed_text(self) -> str:
        """'0.050x (0.045-0.055)'."""
        interval = f"{self.ci[0]:.3f}-{self.ci[1]:.3f}" if self.ci else "no interval"
        return f"{self.speedup:.3f}x ({interval})"

    def verdict_text(self) -> str:
        """The rule's word on this set: 'regression (over 5% slower)', 'informational', 'pass', ..."""
        if self.informational:
            return "informational"
        status = self.status
        if status == "regression":
            return "regression (slower)" if self.threshold == 0 else f"regression (over {self.threshold:.1%} slower)"
        return status

    def to_dict(self) -> dict[str, Any]:
        return {"shape_set": self.shape_set, "shape": dict(self.shape), "speedup": self.speedup,
                "speedup_ci": list(self.ci) if self.ci else None, "baseline_ms": self.baseline_ms,
                "candidate_ms": self.candidate_ms, "pairs": self.pairs, "threshold": self.threshold,
                "informational": self.informational, "status": self.status, "regression": self.regressed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShapeSpeedup:
        ci = data.get("speedup_ci")
        return cls(shape_set=int(data["shape_set"]), shape=dict(data.get("shape") or {}),
                   speedup=float(data["speedup"]), ci=(float(ci[0]), float(ci[1])) if ci else None,
                   baseline_ms=float(data.get("baseline_ms") or 0.0), candidate_ms=float(data.get("candidate_ms") or 0.0),
                   pairs=int(data.get("pairs") or 0), threshold=float(data.get("threshold") or 0.0),
                   informational=bool(data.get("informational")))


def from_timing(timing: Sequence[Mapping[str, Any]], shapes: Sequence[Mapping[str, Any]] = ()) -> list[ShapeSpeedup]:
    """The per-shape entries of a result's `details.timing` (as the judge writes them), judged at threshold 0: what
    an older result, written before results carried `per_shape`, says."""
    out = []
    for t in timing:
        if t.get("speedup") is None:
            continue
        s = int(t.get("shape_set", 0))
        ci = t.get("speedup_ci")
        out.append(ShapeSpeedup(shape_set=s, shape=dict(shapes[s]) if s < len(shapes) else {},
                                speedup=float(t["speedup"]), ci=(float(ci[0]), float(ci[1])) if ci else None,
                                baseline_ms=float((t.get("baseline") or {}).get("median_ms") or 0.0),
                                candidate_ms=float((t.get("candidate") or {}).get("median_ms") or 0.0),
                                pairs=int(t.get("pairs") or 0)))
    return out


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def combine(speedups: Sequence[float], intervals: Sequence[tuple[float, float] | None]
            ) -> tuple[float, tuple[float, float] | None]:
    """The headline: the geometric mean of the sets' speedups, and its interval (see the module doc). None for the
    interval when any set has none (a set that could not be resolved leaves the whole unresolved)."""
    center = geomean(speedups)
    if any(ci is None or not (ci[0] > 0 and math.isfinite(ci[1])) for ci in intervals):
        return center, None
    n = len(speedups)
    # Each side's half-width on the log scale is the normal quantile times a standard error; the quantile is the
    # same for every set and for the headline, so it cancels and the combined interval keeps the sets' confidence.
    low = math.sqrt(sum((math.log(m) - math.log(ci[0])) ** 2 for m, ci in zip(speedups, intervals))) / n  # type: ignore[index]
    high = math.sqrt(sum((math.log(ci[1]) - math.log(m)) ** 2 for m, ci in zip(speedups, intervals))) / n  # type: ignore[index]
    return center, (math.exp(math.log(center) - low), math.exp(math.log(center) + high))


def geomean_times(per_shape: Sequence[ShapeSpeedup]) -> tuple[float | None, float | None]:
    """(baseline, candidate): the geometric means of the sets' medians, the times whose ratio the headline speedup
    matches (up to the pairing: a median of ratios is not quite a ratio of medians). A sum over the sets would be
    ruled by the largest set and disagree with the headline (5.4x apart beside a "3.1x slower")."""
    if not per_shape or any(p.baseline_ms <= 0 or p.candidate_ms <= 0 for p in per_shape):
        return None, None
    return geomean([p.baseline_ms for p in per_shape]), geomean([p.candidate_ms for p in per_shape])


def regressions(per_shape: Sequence[ShapeSpeedup]) -> list[ShapeSpeedup]:
    return [p for p in per_shape if p.regressed]


def regression_text(per_shape: Sequence[ShapeSpeedup]) -> str:
    """'slower on shape set 1 (n=16): 0.050x (0.045-0.055), over the 5% threshold' ('' when none regressed)."""
    parts = [f"{p.label}: {p.speed_text()}, beyond the {p.threshold:.1%} threshold" for p in regressions(per_shape)]
    return ("a regression on " + "; ".join(parts)) if parts else ""


def fmt_ms(value: float | None) -> str:
    if value is None or not math.isfinite(value) or value <= 0:
        return "-"
    return f"{value * 1000:.1f} us" if value < 1 else f"{value:.3f} ms"


def markdown_table(per_shape: Sequence[ShapeSpeedup], before: str = "baseline", after: str = "candidate") -> str:
    """The per-shape table every report shows beside its headline."""
    lines = [f"| shape set | {before} (median) | {after} (median) | speedup (95% interval) | pairs | verdict |",
             "|---|---|---|---|---|---|"]
    for p in per_shape:
        lines.append(f"| {p.label.replace('|', '/')} | {fmt_ms(p.baseline_ms)} | {fmt_ms(p.candidate_ms)} | "
                     f"{p.speed_text()} | {p.pairs} | {p.verdict_text()} |")
    return "\n".join(lines)


def text_lines(per_shape: Sequence[ShapeSpeedup]) -> list[str]:
    """One whole line per shape set, for a terminal or a log."""
    return [f"{p.label}: {p.speed_text()}, baseline {fmt_ms(p.baseline_ms)}, candidate {fmt_ms(p.candidate_ms)}, "
            f"{p.pairs} pairs: {p.verdict_text()}" for p in per_shape]

