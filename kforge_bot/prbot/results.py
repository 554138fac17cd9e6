"""The pull-request bot's results document: the report of one run (`PrReport`, written with --json), the
job summary, and `aggregate`, which combines the per-target jobs' documents into one decision per kernel."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot.prbot import evidence
from kforge_bot.prbot.evidence import TargetRow, WorkloadRow
from kforge_bot.prbot.outcomes import KernelOutcome, workloads_hold_back
from kforge_bot.errors import KforgeError
from kforge_bot.text import markdown_text

SCHEMA = "kforge-bot/pr-results/1"


def aggregate(documents: Sequence[Mapping[str, Any]], required: Sequence[str],
              min_speedup: float, require_workload_gain: bool = False) -> list[KernelOutcome]:
    """Combine per-target results: one KernelOutcome per kernel, its rows from every target.

    A candidate qualifies only if it (the same source, by hash) was measured on every required
    target (with no `required_targets`, on every target that reported the kernel), correct on each,
    not slower on any (the interval's upper end above 1.0), and at least `min_speedup` (lower end)
    on one; and not held back by its workloads (outcomes.workloads_hold_back: an output it changes, or with
    `require_workload_gain` a workload it does not speed up, on any target). Among qualifying candidates the one
    with the best smallest speedup wins."""
    by_kernel: dict[str, list[KernelOutcome]] = {}
    for doc in documents:
        for entry in doc.get("kernels") or []:
            run = KernelOutcome.from_dict(entry)
            by_kernel.setdefault(run.id, []).append(run)
    return [_merge(by_kernel[kid], required, min_speedup, require_workload_gain) for kid in sorted(by_kernel)]


@dataclass
class _Candidates:
    """One kernel's candidates across the targets' runs, by source hash."""

    rows: dict[str, dict[str, TargetRow]] = field(default_factory=dict)  # candidate hash -> target -> row
    sources: dict[str, KernelOutcome] = field(default_factory=dict)
    workloads: dict[str, list[WorkloadRow]] = field(default_factory=dict)  # its workloads' rows, every target's

    @classmethod
    def of(cls, runs: Sequence[KernelOutcome]) -> _Candidates:
        found = cls()
        for r in runs:
            if r.candidate is None:
                continue
            h = r.candidate_sha256 or ""
            found.sources.setdefault(h, r)
            for row in r.evidence.targets:
                found.rows.setdefault(h, {})[row.target] = row
            found.workloads.setdefault(h, []).extend(r.evidence.workloads)
        return found


def _merge(runs: Sequence[KernelOutcome], required: Sequence[str], min_speedup: float,
           require_workload_gain: bool) -> KernelOutcome:
    """One kernel's outcome from every target's run of it (aggregate's rules)."""
    first = runs[0]
    reported = sorted({r.target for r in runs if r.evidence.targets})
    need = list(required) or reported
    found = _Candidates.of(runs)
    best: tuple[float, str] | None = None
    reasons: list[str] = []
    for h, per in found.rows.items():
        why = _why_not(h, per, need, found.workloads.get(h, []), min_speedup, require_workload_gain)
        if why:
            reasons.append(why)
            continue
        score = min(row.speedup or 0.0 for row in per.values())
        if best is None or score > best[0]:
            best = (score, h)
    all_rows = tuple(row for r in runs for row in r.evidence.targets)
    blocked = next((r.evidence for r in runs if r.evidence.spec_blocked), None)
    if blocked is not None:  # the PR changed the kernel's test and no maintainer approved it: nothing counts
        outcome = replace(blocked, targets=all_rows, pr_url=None, pr_number=None)
        return replace(first, evidence=outcome, qualifies=False, candidate=None)
    if best is None:
        why = "; ".join(reasons) or "; ".join(sorted({r.evidence.skip_reason or "" for r in runs} - {""})) \
            or "no candidate from any target"
        outcome = replace(first.evidence, targets=all_rows, skip_reason=f"no candidate good on every target: {why}"
                          if reasons else why, pr_url=None, pr_number=None)
        return replace(first, evidence=outcome, qualifies=False, candidate=None)
    chosen = found.sources[best[1]]
    per = found.rows[best[1]]
    outcome = replace(chosen.evidence, targets=tuple(per[t] for t in sorted(per)), skip_reason=None,
                      pr_url=None, pr_number=None, workloads=tuple(found.workloads.get(best[1], [])))
    return replace(chosen, evidence=outcome, qualifies=True, target=",".join(sorted(per)))


def _why_not(h: str, per: Mapping[str, TargetRow], need: Sequence[str], workloads: Sequence[WorkloadRow],
             min_speedup: float, require_workload_gain: bool) -> str | None:
    """Why candidate `h` (its row per target) does not qualify; None where it does."""
    missing = [t for t in need if t not in per]
    wrong = [t for t, row in per.items() if row.correct is not True]
    slower = [t for t, row in per.items() if row.ci_high is None or row.ci_high <= 1.0]
    enough = [t for t, row in per.items() if row.ci_low is not None and row.ci_low >= min_speedup]
    if missing:
        return f"candidate {h[:8]} was not measured on {', '.join(missing)}"
    if wrong:
        return f"candidate {h[:8]} is not correct on {', '.join(wrong)}"
    if slower:
        return f"candidate {h[:8]} is not faster on {', '.join(slower)}"
    if not enough:
        return f"candidate {h[:8]} reaches min_speedup {min_speedup:g} on no target"
    if held := workloads_hold_back(workloads, require_workload_gain):
        return f"candidate {h[:8]}: {held}"
    return None


def load_results_dir(directory: str | Path) -> list[dict[str, Any]]:
    """Every results file under `directory` (as download-artifact leaves them: one folder per job)."""
    root = Path(directory)
    if not root.is_dir():
        raise KforgeError("results directory not found", path=root,
                          hint="download the per-target artifacts into it (actions/download-artifact)")
    docs = []
    for path in sorted(root.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise KforgeError(f"not a readable results file ({exc})", path=path) from exc
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise KforgeError(f"not a kforge-bot pr results file (schema is not {SCHEMA})", path=path)
        docs.append(data)
    if not docs:
        raise KforgeError("no results files (*.json) in the directory", path=root,
                          hint="each target's job writes one with --json PATH; upload and download them as artifacts")
    return docs



@dataclass
class PrReport:
    repository: str
    pr: int | None
    decision: str
    allowed: bool
    head_sha: str | None = None
    base_sha: str | None = None
    kernels: list[KernelOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    published: bool = False
    comment_url: str | None = None

    @property
    def follow_up_prs(self) -> list[int]:
        return [k.evidence.pr_number for k in self.kernels if k.evidence.pr_number]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "repository": self.repository, "pr": self.pr, "head_sha": self.head_sha,
                "base_sha": self.base_sha, "allowed": self.allowed, "decision": self.decision,
                "published": self.published, "comment_url": self.comment_url, "notes": self.notes,
                "follow_up_prs": self.follow_up_prs, "kernels": [k.to_dict() for k in self.kernels]}


def summary_markdown(report: PrReport) -> str:
    outcomes = [k.evidence for k in report.kernels]
    note = None if report.allowed else f"not run: {report.decision}"
    text = evidence.render_summary(outcomes, title=f"kforge-bot pr #{report.pr}" if report.pr else "kforge-bot pr",
                                   note=note)
    extra = [f"- {markdown_text(n)}" for n in report.notes]  # notes can quote file names and logins
    if report.allowed:
        extra.insert(0, f"- trust: {markdown_text(report.decision)}")
    return text + ("\n" + "\n".join(extra) + "\n" if extra else "")


def write_summary(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)

