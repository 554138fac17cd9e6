"""The history's records as series: one per (kernel, shape set or direction, target, runner), its points in the
order of the main line's first-parent commits.

A point's value is the kernel's time relative to its reference, both timed back to back in pairs (load on a shared
runner moves both alike); a kernel that is its own reference has its absolute time. Each point keeps the runner's
software (driver, torch, Triton, harness), so a change of it inside a series is shown, not hidden.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kforge_bot import gitops
from kforge_bot.history.runner import SOFTWARE

RECORD_PREFIX = "results/"


@dataclass
class Point:
    commit: str
    subject: str
    value: float  # relative time (or ms where the kernel is its own reference)
    ci: list[float] | None
    time_ms: float
    reference_ms: float | None
    software: dict[str, str]


@dataclass
class Series:
    kernel: str  # id
    name: str
    part: str  # 'shape set 1 (n=16)', or a direction over the shape sets: 'forward (all shape sets)'
    target: str
    runner: str  # Runner.key
    unit: str  # 'relative' | 'ms'
    threshold: float
    points: list[Point] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.kernel} | {self.part} | {self.target} | {self.runner}"

    def software_changes(self) -> list[tuple[int, dict[str, tuple[str, str]]]]:
        """Where the runner's software changed inside the series: (index of the first point after it, what)."""
        out = []
        for i in range(1, len(self.points)):
            before, after = self.points[i - 1].software, self.points[i].software
            moved = {k: (before.get(k, ""), after.get(k, "")) for k in SOFTWARE if before.get(k) != after.get(k)}
            if moved:
                out.append((i, moved))
        return out


def main_line(root: Path, rev: str = "HEAD") -> list[str]:
    """The first-parent commits up to `rev`, oldest first: the order of every series."""
    out = gitops.run_git(root, "rev-list", "--first-parent", "--reverse", gitops.resolve(root, rev),
                         what=f"cannot list the commits of {rev}")
    return out.split()


def latest_runs(files: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(runner key, commit) -> the last run recorded there (a commit measured again counts as re-measured)."""
    out = {}
    for path, data in files.items():
        if path.startswith(RECORD_PREFIX) and isinstance(data, dict) and data.get("runs"):
            out[(str(data.get("runner")), str(data.get("commit")))] = data["runs"][-1]
    return out


def build_series(files: dict[str, Any], order: list[str], kernels: Collection[str] = ()) -> list[Series]:
    """Every series of the history along `order` (commits not on it are left out), or only the kernels named."""
    position = {sha: i for i, sha in enumerate(order)}
    found: dict[tuple[str, str, str, str], Series] = {}
    runs = sorted(((position[c], r, run) for (r, c), run in latest_runs(files).items() if c in position))
    for _, runner, run in runs:
        software = {k: str(run["runner"].get(k, "")) for k in SOFTWARE}
        for k in run.get("kernels", []):
            if k.get("status") != "measured" or (kernels and k["id"] not in kernels and k["name"] not in kernels):
                continue
            relative = bool(k.get("reference_distinct"))
            for part, value, ci, time_ms, ref_ms in _parts(k, relative):
                key = (k["id"], part, k["target"], runner)
                series = found.setdefault(key, Series(k["id"], k["name"], part, k["target"], runner,
                                                      "relative" if relative else "ms", float(k["threshold"])))
                series.points.append(Point(run["commit"], str(run.get("subject", "")), value, ci, time_ms, ref_ms,
                                           software))
    return [found[key] for key in sorted(found)]


def _parts(k: dict[str, Any], relative: bool) -> list[tuple[str, float, list[float] | None, float, float | None]]:
    out = []
    for s in k.get("shape_sets") or []:
        if relative and s.get("relative"):
            out.append((s["label"], float(s["relative"]), s.get("relative_ci"), s["time_ms"], s["reference_ms"]))
        elif not relative and s.get("time_ms"):
            out.append((s["label"], float(s["time_ms"]), None, s["time_ms"], None))
    for name in ("forward", "backward"):
        figures = (k.get("directions") or {}).get(name)
        if relative and figures and figures.get("relative"):
            out.append((f"{name} (all shape sets)", float(figures["relative"]), figures.get("relative_ci"),
                        float("nan"), None))
    return out
