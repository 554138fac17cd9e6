"""The gate's report: one KernelReport per changed kernel, the GateReport around them, and their JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kforge_bot import HARNESS_VERSION, __version__
from kforge_bot.config.policy import GateRule
from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.evaluate.wire.shapes import geomean_times
from kforge_bot.gate.decision import GATE_VERDICTS, exit_code, fmt_change, fmt_threshold
from kforge_bot.gate.measure import Measurement
from kforge_bot.kernelspec.kernels import Kernel


@dataclass
class KernelReport:
    id: str
    name: str
    file: str
    format: str
    verdict: str
    reason: str
    target: str = ""
    device_name: str = ""
    # With several shape sets: the geometric means of the sets' medians, whose ratio is what `change` says
    # (a sum would be ruled by the largest set). Each set's own figures are in `shapes`.
    base_ms: float | None = None
    head_ms: float | None = None
    speedup: float | None = None
    speedup_ci: list[float] | None = None
    threshold: float | None = None
    confidence: float | None = None
    threshold_from: str = ""  # the policy key the threshold came from (gate.threshold.cpu, gate.rules[0]...)
    rule: str = ""
    # per required target that applies to this kernel: "measured", or "skipped (needs cuda)"
    required: dict[str, str] = field(default_factory=dict)
    new: bool = False
    cached: bool = False
    measured: bool = False
    confirmed: bool = False
    first_run: dict[str, Any] | None = None
    touched_by: list[str] = field(default_factory=list)
    # What the change edits of the kernel's test (reference, inputs, shapes, ...), and the verdict under each
    # spec measured ("base", and "head" once a maintainer approved the change).
    spec_changes: list[str] = field(default_factory=list)
    under_spec: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    key: str | None = None
    evaluation: dict[str, Any] | None = None
    # Each shape set (evaluate.wire.shapes.ShapeSpeedup.to_dict, with its `change`), judged by the one rule.
    shapes: list[dict[str, Any]] = field(default_factory=list)
    # A kernel with a backward: per direction (forward, backward, forward+backward) its speedup, interval and
    # change, as the headline's are (the headline is forward+backward).
    directions: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The timing's conditions in a line: each side's busy threads (evaluate.judge.threads_text), and what disturbed
    # it where something did (the whole summary is in `evaluation.details.conditions`).
    conditions: str = ""

    @property
    def change(self) -> str:
        return fmt_change(self.speedup, self.speedup_ci)

    @property
    def unmeasured_required(self) -> list[str]:
        return [t for t, status in self.required.items() if status != "measured"]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["change"] = self.change
        data["threshold_text"] = fmt_threshold(self.threshold, self.target)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelReport:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class GateReport:
    repo: str
    base_ref: str
    head_ref: str
    base_sha: str
    head_sha: str
    merge_base: str
    kernels: list[KernelReport]
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    targets: dict[str, dict[str, str]] = field(default_factory=dict)
    policy: str = ""
    all_kernels: bool = False
    cache_dir: str | None = None
    wall_s: float = 0.0
    required_targets: list[str] = field(default_factory=list)  # the policy's, as written
    require_all_targets: bool = False
    all_skipped: str = "fail"  # the policy's gate.all_skipped
    workloads: list[Any] = field(default_factory=list)  # kforge_bot.workloads.gate.WorkloadReport, a row each

    def nothing_measured(self) -> str:
        """The one line for a run whose every changed kernel was skipped, where the policy makes that fail."""
        if self.all_skipped != "fail" or not self.kernels or any(k.verdict != "skipped" for k in self.kernels):
            return ""
        return (f"nothing was checked: all {len(self.kernels)} changed kernel(s) were skipped here "
                f"({self.kernels[0].reason}); run the gate where they run, or set gate.all_skipped: pass")

    def unmeasured_required(self) -> dict[str, list[str]]:
        """Required target -> the ids of the kernels this run could not measure on it."""
        out: dict[str, list[str]] = {}
        for k in self.kernels:
            for t in k.unmeasured_required:
                out.setdefault(t, []).append(k.id)
        return out

    @property
    def exit_code(self) -> int:
        missing = sum(len(v) for v in self.unmeasured_required().values())
        return exit_code([k.verdict for k in (*self.kernels, *self.workloads)], missing, self.require_all_targets) \
            or (1 if self.nothing_measured() else 0)

    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in GATE_VERDICTS}
        for k in (*self.kernels, *self.workloads):
            out[k.verdict] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kforge_bot": __version__,
            "harness_version": HARNESS_VERSION,
            "repo": self.repo,
            "base": {"ref": self.base_ref, "sha": self.base_sha, "merge_base": self.merge_base},
            "head": {"ref": self.head_ref, "sha": self.head_sha},
            "all_kernels": self.all_kernels,
            "policy": self.policy,
            "targets": self.targets,
            "cache_dir": self.cache_dir,
            "counts": self.counts(),
            "exit_code": self.exit_code,
            "required_targets": {
                "targets": self.required_targets,
                "require_all_targets": self.require_all_targets,
                "unmeasured": self.unmeasured_required(),
                "fails": self.require_all_targets and bool(self.unmeasured_required()),
            },
            "nothing_measured": self.nothing_measured() or None,
            "kernels": [k.to_dict() for k in self.kernels],
            "workloads": [w.to_dict() for w in self.workloads],
            "unchanged": self.unchanged,
            "removed": self.removed,
            "notes": self.notes,
            "wall_s": round(self.wall_s, 3),
        }


def _trim(result: EvalResult) -> dict[str, Any]:
    data = result.to_dict()
    data.get("correctness", {}).pop("records", None)
    details = data.get("details", {})
    if "log_tail" in details:
        details["log_tail"] = details["log_tail"][-2000:]
    if "traceback" in details:
        details["traceback"] = details["traceback"][-2000:]
    data.pop("profile", None)
    return data


def report_from(kernel: Kernel, m: Measurement, rule: GateRule, kind: str, touched: list[str],
                 new: bool) -> KernelReport:
    r = m.result
    report = KernelReport(id=kernel.id, name=kernel.name, file=kernel.file, format=kernel.format, verdict=m.verdict,
                          reason=m.reason, target=kind, threshold=rule.threshold, confidence=rule.confidence,
                          threshold_from=rule.threshold_from, rule=rule.matched, new=new, measured=True,
                          confirmed=m.first is not None, touched_by=touched, wall_s=round(m.wall_s, 3))
    if r is not None:
        report.device_name = r.device_name
        base_ms, head_ms = geomean_times(r.per_shape) if r.per_shape else (
            r.baseline.median_ms if r.baseline else None, r.candidate.median_ms if r.candidate else None)
        report.base_ms = base_ms if not new else None
        report.head_ms = head_ms if not new else None
        report.shapes = [] if new else [{**p.to_dict(), "change": fmt_change(p.speedup, p.ci)} for p in r.per_shape]
        report.speedup = r.speedup if not new else None
        report.speedup_ci = list(r.speedup_ci) if r.speedup_ci and not new else None
        report.evaluation = _trim(r)
        shown = r.details.get("conditions") or {}
        report.conditions = "; ".join(x for x in (shown.get("threads"), shown.get("disturbed") and
                                                  f"disturbed: {shown['disturbed']}") if x)
        if not new:
            report.directions = {name: {"speedup": f["speedup"], "speedup_ci": f["speedup_ci"],
                                        "change": fmt_change(f["speedup"], f["speedup_ci"])}
                                 for name, f in (r.details.get("directions") or {}).items()}
    if m.first is not None:
        report.first_run = {"speedup": m.first.speedup,
                            "speedup_ci": list(m.first.speedup_ci) if m.first.speedup_ci else None,
                            "change": fmt_change(m.first.speedup, m.first.speedup_ci),
                            "pairs": [t.get("pairs") for t in m.first.details.get("timing", [])],
                            "shapes": [{**p.to_dict(), "change": fmt_change(p.speedup, p.ci)}
                                       for p in m.first.per_shape]}
    return report

