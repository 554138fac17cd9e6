"""`optimize --workload NAME`: a candidate kernel's end-to-end change. The workload (from the kernel's manifest) runs
with the kernel as written in one process and with the candidate in its place in the other, in pairs
(kforge_bot.workloads.measure), judged by the gate's rule at `gate.workloads.threshold`."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from kforge_bot.config.policy import Policy
from kforge_bot.errors import KforgeError
from kforge_bot.spec import MANIFEST_NAME, KernelSpec, module_name, read_manifest
from kforge_bot.workloads.gate import Log, WorkloadReport, budget_for, rate, verdict
from kforge_bot.workloads.measure import Side, measure
from kforge_bot.workloads.spec import WorkloadSpec, load_workloads


def find_workload(spec: KernelSpec, name: str) -> WorkloadSpec:
    """The workload `name` of the kernel's own manifest, or a one-line error naming the ones there are."""
    manifest = Path(spec.root) / MANIFEST_NAME
    if spec.format != "manifest" or not manifest.is_file():
        raise KforgeError(f"--workload {name}: {spec.name} is not a kforge.yaml kernel, so it has no workloads",
                          hint="add a workloads: section beside the kernel in its kforge.yaml (docs/workloads.md)")
    workloads = load_workloads(manifest, read_manifest(manifest).get("workloads"))
    if name not in workloads:
        have = ", ".join(sorted(workloads)) or "none"
        raise KforgeError(f"--workload: no workload named {name!r} (have: {have})", path=manifest)
    return workloads[name]


def candidate_end_to_end(spec: KernelSpec, workload: WorkloadSpec, source: str, kind: str, policy: Policy,
                         log: Log | None = None) -> WorkloadReport:
    """The workload with `source` in place of the kernel's file, against the kernel as written."""
    roots = [Path(workload.root) / r for r in workload.import_roots] + [Path(workload.root)]
    module = module_name(spec.kernel_file, roots, Path(spec.root))
    row = WorkloadReport(workload.name, MANIFEST_NAME, "error", "", target=kind, unit=workload.unit,
                         threshold=policy.gate.workloads.threshold_for(kind), kernels=[spec.name])
    if module is None:
        row.reason = f"{spec.kernel_file} has no module name the workload could import it by"
        return row
    folder = Path(tempfile.mkdtemp(prefix="kforge-candidate-"))
    try:
        path = folder / Path(spec.kernel_file).name
        path.write_text(source, encoding="utf-8")
        m = measure(Side("as written", workload), Side("candidate", workload, {module: str(path)}, (str(folder),)),
                    kind, policy.eval_settings("optimize"), budget_for(policy, kind), log=log)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    row.verdict, row.reason = verdict(m, row.threshold or 0.0, [], [])
    row.measurement, row.pairs, row.noise_floor = m.to_dict(), m.pairs, m.noise_floor
    row.speedup, row.speedup_ci = m.speedup, list(m.speedup_ci) if m.speedup_ci else None
    if m.base_ms:
        row.base_rate = rate(workload, sorted(m.base_ms)[len(m.base_ms) // 2])
        row.head_rate = rate(workload, sorted(m.head_ms)[len(m.head_ms) // 2])
    return row
