"""A change point becomes an alert only when a re-measurement confirms it: the commits on each side of it are timed
interleaved (bisect's first step, the gate between a commit two before the change and one after it), then bisected
to the commit. A confirmed, unacknowledged regression opens one GitHub issue per kernel, or comments once on the one
already open: the kernel, the shape sets, the size with its interval, the bisected commit."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_bot.config.policy import Policy
from kforge_bot.history.bisect import BisectResult, Probe, bisect, gate_probe
from kforge_bot.history.changes import ChangePoint, fingerprint
from kforge_bot.history.report import HistoryReport
from kforge_bot.text import code_span, markdown_text

LABEL = "kforge:regression"
SIDE = 2  # commits before the change point the re-measurement starts from (its place may be one commit off)

ProbeFactory = Callable[[str, str], Probe]  # (good commit, kernel) -> a bisection step


@dataclass
class Alert:
    change: ChangePoint
    parts: list[str]  # every shape set (or direction) of the kernel that changed at that commit
    result: BisectResult

    @property
    def confirmed(self) -> bool:
        return self.result.status == "found"

    def to_dict(self) -> dict[str, Any]:
        return {"change": self.change.to_dict(), "parts": self.parts, "bisect": self.result.to_dict(),
                "confirmed": self.confirmed}


def confirm(root: Path, report: HistoryReport, policy: Policy, *, target: str = "auto",
            timing_budget_s: float | None = None, probes: ProbeFactory | None = None) -> list[Alert]:
    """Every open regression of the report, re-measured and bisected (one per kernel and commit)."""
    make = probes or (lambda good, kernel: gate_probe(root, good, kernel, policy, target=target,
                                                      timing_budget_s=timing_budget_s))
    alerts: list[Alert] = []
    seen: set[tuple[str, str]] = set()
    for change in report.open_regressions():
        if (change.kernel, change.commit) in seen:
            continue
        seen.add((change.kernel, change.commit))
        at = report.commits.index(change.commit)
        good, bad = report.commits[max(at - SIDE, 0)], report.commits[min(at + 1, len(report.commits) - 1)]
        parts = sorted({c.part for c in report.open_regressions() if (c.kernel, c.commit) == (change.kernel,
                                                                                             change.commit)})
        alerts.append(Alert(change, parts, bisect(root, good, bad, change.kernel, make(good, change.kernel))))
    return alerts


def issue_text(alert: Alert, run_url: str | None = None) -> tuple[str, str, str]:
    """(title, issue body, comment) for a confirmed alert. What commits and people wrote is quoted, never linked."""
    c, r = alert.change, alert.result
    title = f"kforge-bot: {markdown_text(c.name)} slower since {(r.first_bad or c.commit)[:10]}"
    lines = [f"**{markdown_text(c.name)}** regressed past its threshold ({c.threshold:.1%}) on {c.target} "
             f"({code_span(c.runner)}).", "",
             f"- shape sets: {', '.join(markdown_text(p) for p in alert.parts)}",
             f"- size, re-measured against {r.good[:10]} (95% interval): {r.change}",
             f"- first bad commit (bisected in {r.measurements} measurements): {r.first_bad} "
             f"{markdown_text(r.subject)}",
             f"- in the history: {c.before:.4g} -> {c.after:.4g} ({c.size:+.1%}), change point {code_span(c.id)}", "",
             f"Accept it with `kforge-bot ack {c.id} --reason ...` or a comment `/kforge ack {c.id} <reason>`."]
    if run_url:
        lines.append(f"Measured by {run_url}")
    body = "\n".join(lines)
    return title, body, body


def file_issue(gh: Any, alert: Alert, run_url: str | None = None) -> Any:
    """Open the kernel's issue or comment on it (kforge_bot.github.client.GitHub.open_or_comment_issue)."""
    title, body, comment = issue_text(alert, run_url)
    marker = f"<!-- kforge-history kernel {fingerprint_kernel(alert.change.kernel)} -->"
    return gh.open_or_comment_issue(title=title, body=body, marker=marker, comment=comment,
                                    comment_marker=f"<!-- kforge-history change {fingerprint(alert.change)} -->",
                                    label=LABEL)


def fingerprint_kernel(kernel: str) -> str:
    return hashlib.sha256(kernel.encode()).hexdigest()[:16]
