"""Markdown table of the A/A verdicts in KernelBench acceptance results (jsonl rows of kernelbench_acceptance.py).

    python benchmarks/sweep_table.py benchmarks/results/kernelbench_l1_sweep_h200_run*.jsonl

One row per problem (the last file's row wins), ordered by level and number, then a summary line: how many
verdicts, how many intervals contain 1.0, the widest half-width, and the walls. Nothing is measured here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _key(problem: str) -> tuple[int, int]:
    level, _, number = problem.partition("/")
    return (int(level), int(number)) if level.isdigit() and number.isdigit() else (99, 0)


def _fit(aa: dict[str, Any]) -> str:
    fit = aa.get("memory_fit")
    if not fit:
        return "full plan"
    where = "outputs on the device" if fit.get("device_outputs") else "outputs through the host"
    return f"{fit.get('seeds')} seed, {fit.get('rotate_sets')} timed set(s), {where}"


def table(rows: dict[str, dict[str, Any]]) -> str:
    lines = ["| problem | time (UTC) | A/A verdict | speedup (95% CI) | half-width | mode | wall | memory fit |",
             "|---|---|---|---|---|---|---|---|"]
    half_widths, walls, outside = [], [], []
    for problem in sorted(rows, key=_key):
        row = rows[problem]
        aa = row.get("aa") or {}
        time = str(row.get("date", ""))[11:16]
        if aa.get("speedup") is None or not aa.get("ci"):
            lines.append(f"| {problem} {row.get('name', '')} | {time} | {aa.get('verdict', 'none')} "
                         f"({str(aa.get('reason', ''))[:120]}) | | | | {aa.get('wall_s', '')} s | |")
            continue
        speedup, (low, high) = aa["speedup"], aa["ci"]
        half = (high - low) / 2 / speedup
        half_widths.append((half, problem))
        walls.append(aa.get("wall_s") or 0.0)
        contains = low <= 1.0 <= high
        if not contains:
            outside.append(problem)
        mark = "" if contains else " **excludes 1.0**"
        lines.append(f"| {problem} {row.get('name', '')} | {time} | {aa.get('verdict')} | {speedup:.4f}x "
                     f"({low:.4f}-{high:.4f}){mark} | +-{half:.2%} | {aa.get('mode', '')} | {aa.get('wall_s')} s "
                     f"| {_fit(aa)} |")
    walls.sort()
    widest = max(half_widths) if half_widths else (0.0, "")
    summary = (f"\n{len(rows)} problems, {len(half_widths)} with an interval; {len(half_widths) - len(outside)} "
               f"contain 1.0" + (f" (not: {', '.join(outside)})" if outside else "") +
               f"; widest half-width +-{widest[0]:.2%} ({widest[1]})")
    if walls:
        summary += f"; wall {walls[0]}-{walls[-1]} s, median {walls[len(walls) // 2]} s, total {sum(walls):.0f} s"
    return "\n".join(lines) + summary + "\n"


def main(paths: list[str]) -> None:
    rows: dict[str, dict[str, Any]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("aa"):
                    rows[row["problem"]] = row
    print(table(rows), end="")


if __name__ == "__main__":
    main(sys.argv[1:])
