"""A candidate kernel's end-to-end change: the workload runs with the kernel as written in one process and with the
candidate in its place in the other, in pairs (kforge_bot.workloads.measure), judged by the gate's rule at
`gate.workloads.threshold`.

- `optimize --workload NAME` (`candidate_end_to_end`): a workload of the kernel's own manifest, named;
- the PR bot's follow-up PR (`follow_up_workloads`): every workload of the base branch's copy of the kernel's
  manifest that reaches the kernel's file, with the pull request's kernel code as written against the candidate.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from kforge_bot.config.policy import Policy
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import MANIFEST_NAME, KernelSpec, module_name, read_manifest
from kforge_bot.kernelspec.kernels import Kernel
from kforge_bot.workloads.gate import (Log, WorkloadReport, budget_for, head_kernel_modules, judge_row,
                                       reached_files)
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
    return end_to_end(workload, MANIFEST_NAME, [spec.name], module, Path(spec.kernel_file).name, source, kind,
                      policy, policy.eval_settings("optimize"), log=log)


def end_to_end(workload: WorkloadSpec, manifest: str, kernel_names: list[str], module: str | None, file_name: str,
               source: str, kind: str, policy: Policy, settings: EvalSettings, overlay: dict[str, str] | None = None,
               readable: tuple[str, ...] = (), log: Log | None = None) -> WorkloadReport:
    """One workload: `overlay` (module -> file: the kernel code as written, where it comes from another checkout)
    in one process, the same with `source` as module `module` in the other."""
    row = WorkloadReport(workload.name, manifest, "error", "", target=kind, unit=workload.unit,
                         threshold=policy.gate.workloads.threshold_for(kind), kernels=kernel_names)
    if module is None:
        row.reason = f"{file_name} has no module name the workload could import it by"
        return row
    folder = Path(tempfile.mkdtemp(prefix="kforge-candidate-"))
    try:
        path = folder / file_name
        path.write_text(source, encoding="utf-8")
        written = overlay or {}
        m = measure(Side("as written", workload, written, readable),
                    Side("candidate", workload, {**written, module: str(path)}, (*readable, str(folder))),
                    kind, settings, budget_for(policy, kind), log=log)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    judge_row(row, m, workload, [], [Path(p) for p in readable])
    return row


def follow_up_workloads(kernel: Kernel, base_root: Path, head_root: Path, source: str, kind: str, policy: Policy,
                        log: Log | None = None) -> list[WorkloadReport]:
    """Each workload of the base's copy of the kernel's manifest whose program reaches the kernel's file and which
    runs on `kind`: the pull request's kernel code as written against `source` in its place. Everything about the
    workload comes from the base branch; only the kernel code from the head (`head_kernel_modules`)."""
    if kernel.manifest is None or kernel.spec is None:
        return []
    base_manifest = base_root / kernel.manifest
    head_dir = (head_root / kernel.manifest).parent
    if not base_manifest.is_file():
        return []
    try:
        workloads = load_workloads(base_manifest, read_manifest(base_manifest).get("workloads"))
    except KforgeError:
        return []  # the gate reports a base manifest whose workloads do not load
    say = log or (lambda _msg: None)
    settings = policy.eval_settings("pr")
    rows = []
    for spec in workloads.values():
        if kind not in spec.targets:
            continue
        reached = reached_files(spec, base_manifest.parent, base_root) | reached_files(spec, head_dir, head_root)
        if kernel.file not in reached:
            continue
        roots = [head_dir / r for r in spec.import_roots] + [head_dir]
        module = module_name(os.path.relpath(head_root / kernel.file, head_dir), roots, head_dir)
        overlay = head_kernel_modules(spec, head_dir, head_root, [kernel])
        say(f"{kernel.name}: workload {spec.name}, the kernel as written against the candidate on {kind}")
        row = end_to_end(spec, kernel.manifest, [kernel.name], module, Path(kernel.file).name, source, kind, policy,
                         settings, overlay, (str(head_root),),
                         log=lambda msg, name=spec.name: say(f"workload {name}: {msg}"))
        for checkout in (head_root, base_root):
            row.reason = row.reason.replace(f"{checkout}{os.sep}", "")
        say(f"{kernel.name}: workload {spec.name}: {row.verdict} ({row.reason})")
        rows.append(row)
    return rows
