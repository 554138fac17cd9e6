"""`track`: one commit's measurement of every managed kernel on this runner, as one history record.

Each kernel is measured as the gate measures (kforge_bot.gate.measure.gate_settings, kforge_bot.evaluate.evaluate):
at the commit, under the commit's own test, its time interleaved in pairs with its reference's, on every shape set
(and each direction of a kernel with a backward). The record keeps both times and their ratio with the harness's
interval: the ratio (kernel / reference, timed back to back) is what the series are made of, since a shared runner's
load moves both sides of a pair alike; a kernel that is its own reference has the absolute time only.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Collection
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kforge_bot import gitops
from kforge_bot.config.policy import Policy
from kforge_bot.evaluate.session import EvaluateFn, EvaluationSession
from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.gate.decision import harness_verdict
from kforge_bot.gate.measure import again_if_disturbed, gate_settings
from kforge_bot.history.runner import Runner
from kforge_bot.kernelspec import has_own_reference, kernel_implementation
from kforge_bot.kernelspec.kernels import Kernel, discover
from kforge_bot.targets import TargetChoice

Log = Callable[[str], None]


def commit_facts(root: Path, sha: str) -> dict[str, Any]:
    """The commit's subject and committer time (the subject is untrusted text: shown escaped, never linked)."""
    out = gitops.run_git(root, "show", "-s", "--format=%ct%n%s", sha, what=f"cannot read commit {sha[:12]}")
    stamp, _, subject = out.partition("\n")
    return {"commit": sha, "subject": subject.strip(), "commit_time": int(stamp.strip() or 0)}


def inverse_ci(ci: Any) -> list[float] | None:
    """A speedup interval (reference / kernel) as one on the kernel's relative time (kernel / reference)."""
    if not ci or not ci[0] or not ci[1]:
        return None
    return [1.0 / float(ci[1]), 1.0 / float(ci[0])]


def shape_entries(result: EvalResult) -> list[dict[str, Any]]:
    return [{"shape_set": p.shape_set, "label": p.label, "shape": p.shape, "time_ms": p.candidate_ms,
             "reference_ms": p.baseline_ms, "relative": 1.0 / p.speedup if p.speedup else None,
             "relative_ci": inverse_ci(p.ci), "pairs": p.pairs} for p in result.per_shape]


def direction_entries(result: EvalResult) -> dict[str, Any]:
    """A kernel with a backward: each direction's relative time over the shape sets (the forward alone can move)."""
    out = {}
    for name, figures in (result.details.get("directions") or {}).items():
        speedup = figures.get("speedup")
        out[name] = {"relative": 1.0 / speedup if speedup else None,
                     "relative_ci": inverse_ci(figures.get("speedup_ci"))}
    return out


def measure_kernel(kernel: Kernel, policy: Policy, target: TargetChoice, timing_budget_s: float | None,
                   evaluator: EvaluateFn | None = None) -> dict[str, Any]:
    """One kernel's entry in a record: measured (its shape sets and directions), or why not."""
    entry: dict[str, Any] = {"id": kernel.id, "name": kernel.name, "file": kernel.file}
    if kernel.spec is None:
        return {**entry, "status": "error", "reason": f"does not load: {kernel.error}"}
    rule = policy.rule_for(kernel.name, kernel.file)
    if rule.skip:
        return {**entry, "status": "skipped", "reason": f"skipped by the policy ({rule.matched})"}
    kind, why = target.kernel_kind(kernel.spec.targets)
    if kind is None:
        return {**entry, "status": "skipped", "reason": why}
    rule = policy.rule_for(kernel.name, kernel.file, kind)
    settings = gate_settings(policy, rule, timing_budget_s)
    started = time.monotonic()
    distinct = has_own_reference(kernel.spec)
    # Timed in pairs against its reference (the oracle), not against the spec's baseline, which for a repository's
    # own kernel is the kernel itself.
    # A run again after a disturbed one reuses the first's seeds and reference outputs, as the gate's does.
    with EvaluationSession(kind, settings.seed_count(kernel.spec.seeds), evaluate_fn=evaluator) as session:
        result = again_if_disturbed(functools.partial(session.evaluate, kernel.spec, kernel_implementation(kernel.spec),
                                                      settings, baseline=kernel.spec.reference if distinct else None))
    entry.update(target=kind, threshold=rule.threshold, reference_distinct=distinct,
                 wall_s=round(time.monotonic() - started, 3))
    if result.verdict == "inconclusive":  # disturbed twice: no point of any series (never a figure)
        return {**entry, "status": "inconclusive", "reason": f"disturbed twice: {result.reason}"}
    bad = harness_verdict(result)
    if bad:
        return {**entry, "status": bad[0], "reason": bad[1]}
    return {**entry, "status": "measured", "reason": result.reason, "shape_sets": shape_entries(result),
            "directions": direction_entries(result)}


def track_commit(root: Path, rev: str, runner: Runner, policy: Policy, *, target: TargetChoice,
                 kernels: Collection[str] = (), timing_budget_s: float | None = None, log: Log | None = None,
                 evaluator: EvaluateFn | None = None) -> dict[str, Any]:
    """The record of one commit on this runner: every managed kernel (or those named, by id or name) measured."""
    say = log or (lambda _m: None)
    sha = gitops.resolve(root, rev)
    record: dict[str, Any] = {**commit_facts(root, sha), "runner": runner.to_dict(), "policy": policy.source,
                              "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              "kernels": [], "notes": []}
    with gitops.worktree(root, sha) as checkout:
        found = discover(checkout.resolve(), policy, strict=False, notes=record["notes"])
        for kid in sorted(found):
            kernel = found[kid]
            if kernels and kid not in kernels and kernel.name not in kernels:
                continue
            say(f"{sha[:10]} {kernel.name}: measuring")
            entry = measure_kernel(kernel, policy, target, timing_budget_s, evaluator)
            entry["reason"] = str(entry.get("reason", "")).replace(f"{checkout.resolve()}{os.sep}", "")
            record["kernels"].append(entry)
            say(f"{sha[:10]} {kernel.name}: {entry['status']}")
    return record


def results_path(runner: Runner, sha: str) -> str:
    return f"results/{runner.key}/{sha}.json"


def append_record(files: dict[str, Any], runner: Runner, record: dict[str, Any]) -> dict[str, Any]:
    """The files an append writes: the commit's file on this runner with this run added (a commit tracked again
    keeps both runs), and the runner's facts."""
    path = results_path(runner, record["commit"])
    existing = files.get(path) or {"commit": record["commit"], "runner": runner.key, "runs": []}
    return {path: {**existing, "runs": [*existing["runs"], record]},
            f"runners/{runner.key}.json": runner.to_dict()}
