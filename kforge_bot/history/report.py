"""The history as one report: its series along the main line, their change points (acknowledged ones marked), the
acknowledgements, and where the runners' software changed. Plain data, which the text, JSON and HTML views share."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kforge_bot.history.acks import acks_of
from kforge_bot.history.changes import ChangePoint, change_points
from kforge_bot.history.series import Series, build_series, main_line
from kforge_bot.history.store import Store


@dataclass
class HistoryReport:
    rev: str
    commits: list[str]
    series: list[Series]
    changes: list[ChangePoint]
    acks: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def open_regressions(self) -> list[ChangePoint]:
        return [c for c in self.changes if c.regression and not c.acknowledged]

    def to_dict(self) -> dict[str, Any]:
        return {"rev": self.rev, "commits": self.commits,
                "series": [{**{k: v for k, v in asdict(s).items() if k != "points"}, "key": s.key,
                            "points": [asdict(p) for p in s.points],
                            "software_changes": [{"index": i, "changed": {k: list(v) for k, v in moved.items()}}
                                                 for i, moved in s.software_changes()]} for s in self.series],
                "change_points": [c.to_dict() for c in self.changes],
                "acknowledgements": list(self.acks.values()), "notes": self.notes}


def load_report(root: Path, store: Store, rev: str = "HEAD", kernels: Collection[str] = ()) -> HistoryReport:
    store.fetch()
    files = store.read()
    order = main_line(root, rev)
    acks = acks_of(files)
    series = build_series(files, order, kernels)
    changes = [c for s in series for c in change_points(s, acks)]
    notes = [] if files else [f"no history yet on {store.ref}: run `kforge-bot track` first"]
    return HistoryReport(order[-1], order, series, changes, acks, notes)


def text_lines(report: HistoryReport) -> list[str]:
    lines = []
    for s in report.series:
        last = s.points[-1]
        unit = "x its reference" if s.unit == "relative" else "ms"
        lines.append(f"{s.name}, {s.part}, {s.target} on {s.runner}: {len(s.points)} commit(s), latest "
                     f"{last.value:.4g} {unit} at {last.commit[:10]}, threshold {s.threshold:.1%}")
        for i, moved in s.software_changes():
            what = ", ".join(f"{k} {a or '?'} -> {b or '?'}" for k, (a, b) in moved.items())
            lines.append(f"  software changed at {s.points[i].commit[:10]}: {what}")
        for c in (c for c in report.changes if (c.kernel, c.part, c.target, c.runner) ==
                  (s.kernel, s.part, s.target, s.runner)):
            word = "slower" if c.regression else "faster"
            ack = (f"; acknowledged by {c.acknowledged.get('by')}: {c.acknowledged.get('reason')}"
                   if c.acknowledged else "")
            lines.append(f"  change point {c.id}: {word} by {abs(c.size):.1%} ({c.before:.4g} -> {c.after:.4g}) "
                         f"at {c.commit[:10]} {c.subject}{ack}")
    lines.extend(f"note: {n}" for n in report.notes)
    return lines
