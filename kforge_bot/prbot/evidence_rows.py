"""The evidence's data: one target's measurement, one workload's, and one kernel's whole outcome, plain and
JSON-friendly, with the figures as the follow-up PR words them ("n/a" for what is missing, never filled in)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from collections.abc import Mapping
from typing import Any

NA = "n/a"


@dataclass(frozen=True)
class TargetRow:
    """One target's measurement of the best candidate against the baseline (times in ms)."""

    target: str  # the hardware runner name, e.g. b200
    runner_labels: tuple[str, ...] = ()
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    roofline_before: float | None = None  # fraction of the bound ceiling, 0..1
    roofline_after: float | None = None
    roofline_bound: str | None = None  # e.g. "DRAM bandwidth"
    correct: bool | None = None
    target_kind: str | None = None  # cuda | xpu | cpu | mps, for the reproduce command
    device_name: str | None = None
    # Each shape set (kforge_bot.evaluate.wire.shapes.ShapeSpeedup.to_dict): the speedup is their geometric mean.
    shapes: tuple[Mapping[str, Any], ...] = ()
    # A kernel with a backward: {direction: {"speedup", "speedup_ci"}} for forward, backward and forward+backward
    # (the row's speedup is forward+backward's).
    directions: Mapping[str, Any] = field(default_factory=dict)
    # The speedup against other baselines than eager, where the policy asked for them (evaluate.baselines):
    # (what it is against, speedup, interval low, interval high); the columns above are against eager.
    baselines: tuple[tuple[str, float, float | None, float | None], ...] = ()

    @property
    def faster(self) -> bool:
        """Faster with confidence: the whole interval above 1."""
        return self.ci_low is not None and self.ci_low > 1.0


@dataclass(frozen=True)
class WorkloadRow:
    """One workload's end-to-end measurement of the candidate against the kernel as written (docs/workloads.md):
    the gate's verdict at its threshold, and the figures (rates in `unit`; speedup = time before / time after)."""

    name: str
    target: str
    verdict: str  # improved | pass | regression | incorrect | error
    reason: str = ""
    unit: str = ""
    before: float | None = None
    after: float | None = None
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    pairs: int = 0
    threshold: float | None = None

    @property
    def gain(self) -> bool:
        """Faster end to end with confidence: the whole interval above 1, the output the same."""
        return self.verdict in ("improved", "pass") and self.ci_low is not None and self.ci_low > 1.0


@dataclass(frozen=True)
class KernelEvidence:
    """The evidence for one kernel, as the follow-up PR, the comment and the summary show it (a `KernelOutcome`,
    kforge_bot.prbot.outcomes, carries it with the candidate and the raw result)."""

    kernel: str
    file: str
    targets: tuple[TargetRow, ...] = ()
    correctness: Mapping[str, Any] = field(default_factory=dict)
    profile_before: str | None = None
    profile_after: str | None = None
    counters: str | None = None  # Markdown: the hardware counters' before/after table and reading (kforge_bot.optimize.counters)
    counters_tool: str = "Nsight Compute"  # the profiler they came from (unitrace on Intel XPU)
    analyst_note: str | None = None
    how_found: Mapping[str, Any] = field(default_factory=dict)
    diff: str | None = None
    pr_url: str | None = None
    pr_number: int | None = None
    skip_reason: str | None = None  # why no follow-up PR: no improvement, not trusted, skipped by policy, ...
    branch: str | None = None
    candidate_path: str | None = None  # where the candidate lives on `branch` (default: `file`)
    # How the kernel was judged when not simply by the base's test: new in the PR (its own), or a change to its test
    # (spec-changed: `spec_blocked` until a maintainer's label approves it).
    spec_note: str | None = None
    spec_blocked: bool = False
    # The workloads that use the kernel, end to end with the candidate (kforge_bot.workloads.candidate).
    workloads: tuple[WorkloadRow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["workloads"] = [asdict(w) for w in self.workloads]
        data["targets"] = [{**asdict(t), "runner_labels": list(t.runner_labels), "shapes": [dict(x) for x in t.shapes]}
                           for t in self.targets]
        data["correctness"] = dict(self.correctness)
        data["how_found"] = dict(self.how_found)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelEvidence:
        known = set(cls.__dataclass_fields__)
        row_known = set(TargetRow.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["targets"] = tuple(
            TargetRow(**{**{k: v for k, v in row.items() if k in row_known},
                         "runner_labels": tuple(row.get("runner_labels") or ()),
                         "shapes": tuple(row.get("shapes") or ()),
                         "baselines": tuple(tuple(b) for b in row.get("baselines") or ())})
            for row in data.get("targets") or ())
        workload_known = set(WorkloadRow.__dataclass_fields__)
        kwargs["workloads"] = tuple(WorkloadRow(**{k: v for k, v in row.items() if k in workload_known})
                                    for row in data.get("workloads") or ())
        return cls(**kwargs)


def fmt_speedup(row: TargetRow) -> str:
    """1.80x (1.78-1.82); the interval says n/a when it was not measured."""
    if row.speedup is None:
        return NA
    ci = (f"{row.ci_low:.2f}-{row.ci_high:.2f}" if row.ci_low is not None and row.ci_high is not None
          else "interval n/a")
    return f"{row.speedup:.2f}x ({ci})"


def fmt_roofline(row: TargetRow) -> str:
    def pct(f: float | None) -> str:
        return NA if f is None else f"{100 * f:.0f}%"
    if row.roofline_before is None and row.roofline_after is None:
        return NA
    tail = f" of {row.roofline_bound}" if row.roofline_bound else ""
    return f"{pct(row.roofline_before)} -> {pct(row.roofline_after)}{tail}"


def fmt_workload_speedup(row: WorkloadRow) -> str:
    """1.04x (1.03-1.05), as the kernel's table gives its speedups."""
    if row.speedup is None:
        return NA
    ci = (f"{row.ci_low:.3f}-{row.ci_high:.3f}" if row.ci_low is not None and row.ci_high is not None
          else "interval n/a")
    return f"{row.speedup:.3f}x ({ci})"


def rate(value: float | None, unit: str) -> str:
    return NA if value is None else f"{value:.4g} {unit}"
