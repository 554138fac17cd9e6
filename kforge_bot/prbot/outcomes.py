"""One kernel's outcome on this runner, as pure functions of plain data: whether its best candidate earns a
follow-up PR (`qualifies`), and the evidence for it (`outcome_for` -> a `KernelOutcome`)."""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kforge_bot.agents.analyst import render_digest
from kforge_bot.prbot.evidence import KernelEvidence, TargetRow, WorkloadRow, fmt_workload_speedup
from kforge_bot.evaluate.wire.shapes import regression_text


def qualifies(result: Any, min_speedup: float) -> tuple[bool, str]:
    """Whether an EvalResult earns a follow-up PR, and if not, why (for the comment)."""
    if result is None:
        return False, "no improvement: no correct candidate was measurably faster than the kernel as written"
    if not result.correct:
        return False, f"no improvement: the best candidate is {result.verdict} ({result.reason})"
    ci = result.speedup_ci
    if ci is None or result.speedup is None:
        return False, "no improvement: the candidate was not timed"
    if ci[0] < min_speedup:
        return False, (f"no improvement above the policy's min_speedup {min_speedup:g} "
                       f"(best {result.speedup:.2f}x, interval {ci[0]:.2f}-{ci[1]:.2f})")
    slow = regression_text(getattr(result, "per_shape", ()))
    if slow:  # optimize never accepts such a candidate; a result from elsewhere is held to the same rule
        return False, f"no improvement: {slow}"
    return True, ""


def target_row(result: Any, target: str, *, kind: str, labels: Sequence[str] = (),
               roofline: Mapping[str, Any] | None = None) -> TargetRow:
    roofline = roofline or {}
    ci = result.speedup_ci
    return TargetRow(target=target, runner_labels=tuple(labels),
                     baseline_ms=result.baseline.median_ms if result.baseline else None,
                     candidate_ms=result.candidate.median_ms if result.candidate else None,
                     speedup=result.speedup, ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None,
                     roofline_before=roofline.get("before"), roofline_after=roofline.get("after"),
                     roofline_bound=roofline.get("bound"), correct=result.correct, target_kind=kind,
                     device_name=result.device_name or None,
                     shapes=tuple(p.to_dict() for p in getattr(result, "per_shape", ())),
                     directions={name: {"speedup": f.get("speedup"), "speedup_ci": f.get("speedup_ci")}
                                 for name, f in (result.details.get("directions") or {}).items()},
                     baselines=_other_baselines(result))


def _other_baselines(result: Any) -> tuple[tuple[str, float, float | None, float | None], ...]:
    """The candidate's speedup against each compiled baseline and the faster of all (details.baselines), named."""
    found = (getattr(result, "details", None) or {}).get("baselines") or {}
    rows: list[tuple[str, float, float | None, float | None]] = []
    for kind, entry in found.items():
        if kind in ("eager", "best", "note") or not isinstance(entry, dict) or not entry.get("against"):
            continue
        rows.append((f"torch.compile ({entry.get('mode')})", *_figure(entry["against"])))
    best = found.get("best")
    if rows and best and best.get("speedup") is not None:
        rows.append((f"the faster of {' and '.join(best.get('baselines') or [])} (the KForge paper's metric)",
                     *_figure(best)))
    return tuple(rows)


def _figure(entry: Mapping[str, Any]) -> tuple[float, float | None, float | None]:
    ci = entry.get("speedup_ci")
    return float(entry["speedup"]), (float(ci[0]) if ci else None), (float(ci[1]) if ci else None)


def unified_diff(before: str, after: str, path: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))


def _profile_text(digest: Mapping[str, Any] | None) -> str | None:
    if not digest:
        return None

    return render_digest(digest)


def candidate_path(kernel_format: str, file: str) -> str:
    """Where the candidate goes on the bot's branch: over a manifest kernel's file; next to a
    KernelBench problem (which must keep its reference `Model`) as `<stem>_kforge.py`."""
    if kernel_format == "kernelbench":
        stem, _, _ = file.rpartition(".py")
        return f"{stem}_kforge.py"
    return file


def correctness_evidence(result: Any, spec: Any) -> dict[str, Any]:
    data = {k: v for k, v in (result.correctness or {}).items() if k != "records"}
    if spec is not None and spec.tolerance and "tolerance" not in data:
        data["tolerance"] = spec.tolerance
    return data


# ------------------------------------------------------------------------------ one kernel


@dataclass
class KernelOutcome:
    """One kernel's outcome in the PR bot on this runner: the evidence the PR shows, the candidate, the raw result,
    and whether it earns a follow-up PR. Its dict keeps the evidence under "outcome", as results files had it."""

    id: str
    evidence: KernelEvidence
    target: str  # runner name or device kind, as reported
    kind: str | None  # device kind measured on
    candidate: str | None = None
    baseline_source: str | None = None
    result: dict[str, Any] | None = None
    qualifies: bool = False

    @property
    def candidate_sha256(self) -> str | None:
        return hashlib.sha256(self.candidate.encode()).hexdigest() if self.candidate is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kernel": self.evidence.kernel, "file": self.evidence.file, "target": self.target,
                "kind": self.kind, "qualifies": self.qualifies, "candidate": self.candidate,
                "candidate_sha256": self.candidate_sha256, "baseline_source": self.baseline_source,
                "result": self.result, "outcome": self.evidence.to_dict(), "pr_number": self.evidence.pr_number,
                "pr_url": self.evidence.pr_url}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelOutcome:
        return cls(id=data["id"], evidence=KernelEvidence.from_dict(data["outcome"]), target=data["target"],
                   kind=data.get("kind"), candidate=data.get("candidate"),
                   baseline_source=data.get("baseline_source"), result=data.get("result"),
                   qualifies=bool(data.get("qualifies")))


def outcome_for(kernel_id: str, name: str, file: str, kernel_format: str, *, target: str, kind: str,
                labels: Sequence[str], baseline_source: str, candidate: str | None, result: Any,
                how: Mapping[str, Any], min_speedup: float, spec: Any = None) -> KernelOutcome:
    """The evidence for one optimized kernel, and whether it earns a PR."""
    how = dict(how)
    roofline = how.pop("roofline", None)
    counters = how.pop("counters", None)
    counters_tool = how.pop("counters_tool", None) or KernelEvidence.counters_tool  # older results: the default
    ok, why = qualifies(result, min_speedup)
    if candidate is None:
        ok = False
    path = candidate_path(kernel_format, file)
    evidence = KernelEvidence(kernel=name, file=file, how_found=how, skip_reason=None if ok else why,
                              candidate_path=path if path != file else None, counters=counters,
                              counters_tool=counters_tool)
    if result is not None:
        evidence = replace(evidence,
                           targets=(target_row(result, target, kind=kind, labels=labels, roofline=roofline),),
                           correctness=correctness_evidence(result, spec),
                           profile_before=_profile_text((result.profile or {}).get("baseline")),
                           profile_after=_profile_text((result.profile or {}).get("candidate")))
    if candidate is not None:
        before = baseline_source if path == file else ""
        evidence = replace(evidence, diff=unified_diff(before, candidate, path) or None)
    trimmed = None
    if result is not None:
        trimmed = result.to_dict()
        trimmed["correctness"] = {k: v for k, v in trimmed.get("correctness", {}).items() if k != "records"}
        trimmed.get("details", {}).pop("log_tail", None)
    return KernelOutcome(id=kernel_id, evidence=evidence, target=target, kind=kind, candidate=candidate,
                         baseline_source=baseline_source, result=trimmed, qualifies=ok)


def skipped(kernel_id: str, name: str, file: str, reason: str, target: str = "n/a") -> KernelOutcome:
    return KernelOutcome(id=kernel_id, evidence=KernelEvidence(kernel=name, file=file, skip_reason=reason),
                         target=target, kind=None)



def workload_row(report: Any) -> WorkloadRow:
    """A workload's end-to-end measurement (kforge_bot.workloads.gate.WorkloadReport) as the evidence shows it."""
    ci = report.speedup_ci
    return WorkloadRow(name=report.name, target=report.target, verdict=report.verdict, reason=report.reason,
                       unit=report.unit, before=report.base_rate, after=report.head_rate, speedup=report.speedup,
                       ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None, pairs=report.pairs,
                       threshold=report.threshold)


def workloads_hold_back(rows: Sequence[WorkloadRow], require_gain: bool) -> str | None:
    """Why the workloads keep a candidate from a follow-up PR, or None: a workload whose output it changes always;
    with the policy's `require_workload_gain`, any workload it does not make faster end to end."""
    wrong = next((w for w in rows if w.verdict == "incorrect"), None)
    if wrong is not None:
        return f"the candidate changes the output of workload {wrong.name}: {wrong.reason}"
    slow = next((w for w in rows if not w.gain), None) if require_gain else None
    if slow is not None:
        return (f"faster alone, but workload {slow.name} is not faster end to end with it on {slow.target} "
                f"({fmt_workload_speedup(slow)} over {slow.pairs} pairs; the policy's require_workload_gain)")
    return None


def with_workloads(run: KernelOutcome, rows: Sequence[WorkloadRow], require_gain: bool) -> KernelOutcome:
    """The outcome with its workloads' end-to-end rows, and whether it still earns a PR (`workloads_hold_back`)."""
    evidence = replace(run.evidence, workloads=tuple(rows))
    why = workloads_hold_back(rows, require_gain) if run.qualifies else None
    if why is not None:
        evidence = replace(evidence, skip_reason=why)
    return replace(run, evidence=evidence, qualifies=run.qualifies and why is None)


def with_spec_note(run: KernelOutcome, note: str | None, blocked: bool) -> KernelOutcome:
    """The outcome with how its kernel was judged (base's spec, its own, approved) said; `blocked`: the PR changed the
    kernel's test without a maintainer's label, so no candidate earns a follow-up PR (kforge_bot/gate/base_spec.py)."""
    if note is None:
        return run
    evidence = replace(run.evidence, spec_note=note, spec_blocked=blocked)
    if blocked:
        measured = run.evidence.skip_reason or "a candidate qualified under the base's spec"
        evidence = replace(evidence, skip_reason=f"{note} ({measured})")
    return replace(run, evidence=evidence, qualifies=run.qualifies and not blocked)
