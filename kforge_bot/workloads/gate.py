"""The gate's workload rows: for each workload of the base's manifests that the change touches (the dependency
scan of its program and inputs reaches a changed file), the base's program with the base's kernels against the
base's program with the head's kernels, on this device, judged by `gate.workloads`: a regression when the paired
ratio's whole interval lies beyond the workload's threshold, `incorrect` when its output differs from the base's."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kforge_bot.config.policy import Policy
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.gate.decision import fmt_change, timing_decision
from kforge_bot.kernelspec import MANIFEST_NAME, module_name, read_manifest
from kforge_bot.kernelspec.dependencies import local_closure
from kforge_bot.kernelspec.dependencies import NO_KERNEL_FOLDERS
from kforge_bot.kernelspec.kernels import Kernel
from kforge_bot.targets import TargetChoice
from kforge_bot.workloads.measure import Budget, Side, WorkloadMeasurement, measure
from kforge_bot.workloads.spec import WorkloadSpec, load_workloads

Log = Callable[[str], None]


@dataclass
class WorkloadReport:
    """One workload's row in the gate's report."""

    name: str
    manifest: str
    verdict: str
    reason: str
    target: str = ""
    unit: str = ""
    threshold: float | None = None
    speedup: float | None = None  # base time / head time: below 1 the head is slower
    speedup_ci: list[float] | None = None
    pairs: int = 0
    base_rate: float | None = None  # in `unit`, from the median of the base's per-process medians
    head_rate: float | None = None
    noise_floor: float | None = None
    touched_by: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # the changed kernels the workload uses
    measurement: dict[str, Any] | None = None

    @property
    def change(self) -> str:
        return fmt_change(self.speedup, self.speedup_ci)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "change": self.change}


def rate(spec: WorkloadSpec, ms: float) -> float:
    """A time per call in the workload's unit."""
    return ms if spec.unit == "ms/step" else spec.items / (ms / 1e3)


def workload_manifests(checkout: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(checkout):
        dirs[:] = sorted(d for d in dirs if d not in NO_KERNEL_FOLDERS and not d.startswith(".kforge"))
        found.extend(Path(folder) / MANIFEST_NAME for f in files if f == MANIFEST_NAME)
    return sorted(found)


def _workloads(manifest: Path, checkout: Path) -> dict[str, WorkloadSpec]:
    try:  # a manifest linked out of the checkout is never read (the kernels' discovery names it)
        data = read_manifest(manifest, checkout)
    except KforgeError:
        return {}  # the kernels' gate reports a manifest that does not load
    return load_workloads(manifest, data.get("workloads"))


def reached_files(spec: WorkloadSpec, root: Path, checkout: Path) -> set[str]:
    """Repository paths the workload's program and inputs can read, as they are at `checkout` (`root`: the
    manifest's folder there)."""
    roots = [root / r for r in spec.import_roots] + [root]
    files = [root / spec.file, root / spec.inputs_file]
    return {p.relative_to(checkout).as_posix() for p in local_closure(files, roots, checkout)
            if p.is_relative_to(checkout)}


def head_kernel_modules(spec: WorkloadSpec, head_manifest_dir: Path, head_root: Path,
                        head_kernels: Iterable[Kernel]) -> dict[str, str]:
    """module -> the head's file, for the kernel code the head contributes: each kernel of this manifest (its file
    and launcher) and the local files they import, less the workload's own program and inputs."""
    roots = [head_manifest_dir / r for r in spec.import_roots] + [head_manifest_dir]
    own = {(head_manifest_dir / f).resolve() for f in (spec.file, spec.inputs_file)}
    starts = [head_root / s for k in head_kernels if k.spec is not None
              and (head_root / (k.manifest or "")).resolve() == (head_manifest_dir / MANIFEST_NAME).resolve()
              for s in (k.file, *([os.path.join(os.path.dirname(k.manifest or ""), k.spec.entry_file)]
                                  if k.spec.entry_file else []))]
    overlay: dict[str, str] = {}
    for path in local_closure(starts, roots, head_root):
        if path.suffix != ".py" or path in own or not path.is_relative_to(head_manifest_dir.resolve()):
            continue
        name = module_name(os.path.relpath(path, head_manifest_dir), roots, head_manifest_dir)
        if name:
            overlay[name] = str(path)
    return overlay


def gate_workloads(base_root: Path, head_root: Path, changed: set[str], policy: Policy, target: TargetChoice,
                   head_kernels: Iterable[Kernel], kernel_rows: list[Any], settings: EvalSettings,
                   log: Log | None = None, measure_them: bool = True) -> list[WorkloadReport]:
    """A row per workload of the base's manifests that the change touches."""
    say = log or (lambda _msg: None)
    head_kernels = list(head_kernels)
    rows: list[WorkloadReport] = []
    for manifest in workload_manifests(head_root):  # the head's entries are checked, never used
        try:
            _workloads(manifest, head_root)
        except KforgeError as exc:
            rel = manifest.relative_to(head_root).as_posix()
            rows.append(WorkloadReport("(head's workloads)", rel, "error",
                                       str(exc).replace(f"{head_root}{os.sep}", "")))
    for manifest in workload_manifests(base_root):
        rel_manifest = manifest.relative_to(base_root).as_posix()
        try:
            specs = _workloads(manifest, base_root)
        except KforgeError as exc:
            rows.append(WorkloadReport("(workloads)", rel_manifest, "error",
                                       str(exc).replace(f"{base_root}{os.sep}", "")))
            continue
        head_dir = (head_root / rel_manifest).parent
        for name, spec in specs.items():
            reached = reached_files(spec, manifest.parent, base_root)
            if head_dir.is_dir():
                reached |= reached_files(spec, head_dir, head_root)
            touched = sorted(changed & reached)
            if not touched:
                continue
            rows.append(_judge(spec, rel_manifest, touched, base_root, head_root, head_dir, policy, target,
                               head_kernels, kernel_rows, settings, say, measure_them))
    return rows


def _judge(spec: WorkloadSpec, rel_manifest: str, touched: list[str], base_root: Path, head_root: Path,
           head_dir: Path, policy: Policy, target: TargetChoice, head_kernels: list[Kernel], kernel_rows: list[Any],
           settings: EvalSettings, say: Log, measure_them: bool) -> WorkloadReport:
    row = WorkloadReport(spec.name, rel_manifest, "skipped", "", unit=spec.unit, touched_by=touched,
                         kernels=[k.name for k in kernel_rows if getattr(k, "file", None) in touched])
    kind, why = target.kernel_kind(spec.targets)
    if kind is None:
        row.reason = why
        return row
    row.target, row.threshold = kind, policy.gate.workloads.threshold_for(kind)
    if not measure_them:
        row.reason = "plan only: would be measured"
        return row
    overlay = head_kernel_modules(spec, head_dir, head_root, head_kernels) if head_dir.is_dir() else {}
    say(f"workload {spec.name}: base against head on {kind}, a fresh process each, samples in alternating pairs, "
        f"threshold {row.threshold:.1%}")
    m = measure(Side("base", spec), Side("head", spec, overlay, readable=(str(head_root),)), kind, settings,
                budget_for(policy, kind), log=lambda msg: say(f"workload {spec.name}: {msg}"))
    judge_row(row, m, spec, kernel_rows, (head_root, base_root))
    say(f"workload {spec.name}: {row.verdict} ({row.reason})")
    return row


def judge_row(row: WorkloadReport, m: WorkloadMeasurement, spec: WorkloadSpec, kernel_rows: list[Any],
              checkouts: Iterable[Path] = ()) -> None:
    """The row's verdict, reason and figures from the measurement (the checkouts' paths cut from the reason)."""
    row.verdict, row.reason = verdict(m, row.threshold or 0.0, kernel_rows, row.kernels)
    row.measurement, row.pairs, row.noise_floor = m.to_dict(), m.pairs, m.noise_floor
    row.speedup, row.speedup_ci = m.speedup, list(m.speedup_ci) if m.speedup_ci else None
    if m.base_ms:
        row.base_rate = rate(spec, sorted(m.base_ms)[len(m.base_ms) // 2])
        row.head_rate = rate(spec, sorted(m.head_ms)[len(m.head_ms) // 2])
    for checkout in checkouts:
        row.reason = row.reason.replace(f"{checkout}{os.sep}", "")


def budget_for(policy: Policy, kind: str) -> Budget:
    """How hard the policy's `gate.workloads` looks on a target kind."""
    gate = policy.gate.workloads
    return Budget(confidence=policy.gate.confidence, precision=gate.precision_for(kind), min_pairs=gate.min_pairs,
                  max_pairs=gate.max_pairs, budget_s=gate.budget_s, sample_s=gate.sample_s, processes=gate.processes)


def verdict(m: WorkloadMeasurement, threshold: float, kernel_rows: list[Any], used: list[str]) -> tuple[str, str]:
    """The gate's word on one workload and its one-line reason (the interval rule of kforge_bot.gate.decision)."""
    if m.status == "error":
        return "error", m.reason
    if m.status == "incorrect":
        return "incorrect", f"its output differs from the base's: {m.reason}"
    figures = f"{fmt_change(m.speedup, m.speedup_ci)} over {m.pairs} pairs of samples"
    decision = timing_decision(m.speedup_ci, threshold)
    if decision == "unmeasured":
        return "error", (f"no interval after {m.pairs} pairs ({m.stop}): raise gate.workloads.budget_s or "
                         "max_pairs")
    if decision == "regression":
        faster = [k for k in kernel_rows if k.name in used and k.speedup and k.speedup > 1.0
                  and k.verdict in ("pass", "improved")]
        alone = (" although " + ", ".join(f"kernel {k.name} is faster alone ({fmt_change(k.speedup, k.speedup_ci)})"
                                          for k in faster)) if faster else ""
        return "regression", f"the workload is slower end to end by more than {threshold:.1%}{alone}: {figures}"
    if decision == "improved":
        return "improved", f"faster end to end by more than {threshold:.1%}: {figures}"
    if decision == "uncertain":
        return "pass", f"not resolved at the {threshold:.1%} threshold ({figures}); not counted as a regression"
    return "pass", f"within the {threshold:.1%} threshold: {figures}"
