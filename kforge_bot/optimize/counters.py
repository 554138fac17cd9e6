"""Hardware counters in the optimize loop: which kernels get a profiler run, and the file the report keeps.

The tool is the target's: Nsight Compute (`ncu`, kforge_bot.counters.ncu) on CUDA, unitrace
(kforge_bot.counters.unitrace) on Intel XPU; both give the same digest rows. The loop profiles the kernel as
written and each accepted candidate (so also the final best), never the rejected ones: one run costs seconds
(ncu replays each kernel ~15 times), and only those two sides feed the analyst's before/after table, the
tuner's next move and the follow-up PR. Collection happens between evaluations, never beside a timed run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kforge_bot.counters import counter_tools, ncu, ncu_parse
from kforge_bot.counters.counter_tools import tool_for
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec
from kforge_bot.text import code_span

KEEP_KERNELS = 20  # per profiled call in the trajectory: the longest ones (a call can launch hundreds)
DETAILS_FILE = "ncu-details.csv"  # the name GPU MODE's tooling and the issue use, whichever tool wrote it


def tool_title(*counters: dict[str, Any] | None) -> str:
    """The profiler's name for a heading: the one the first of `counters` that says came from."""
    return counter_tools.title(next((got.get("tool") for got in counters if got and got.get("tool")), None))


class Counters:
    """Collects for one run; `reason` says why not when it cannot (off, no tool for the target, no tool here)."""

    def __init__(self, spec: KernelSpec, target: str, settings: EvalSettings, report_dir: Path,
                 collect: str = "auto") -> None:  # --counters: auto | off | full (full: keep the .ncu-rep files too)
        self.spec, self.target, self.settings, self.choice = spec, target, settings, collect
        self.tool = tool_for(target)
        self.folder = Path(report_dir) / "ncu"
        self.reason = "switched off (--counters off)" if collect == "off" else self.tool.unavailable(target)

    def collect(self, iteration: int, implementation: Implementation, median_ms: float | None,
                device_name: str = "") -> dict[str, Any]:
        label = "baseline" if iteration == 0 else f"{iteration:04d}"
        got = self.tool.collect(self.spec, implementation, self.target, self.folder, label, settings=self.settings,
                                keep_report=self.choice == "full", device_name=device_name)
        if not got.get("available") and not str(got.get("reason", "")).startswith("the profiled call failed"):
            # The tool itself failed (hung, not permitted, no output): the next version would cost the same again.
            self.reason = f"{self.tool.NAME} failed on an earlier kernel version ({got.get('reason')})"
        if got.get("available"):
            got["kernels"] = sorted(got["kernels"], key=lambda k: -(k.get("duration_us") or 0.0))[:KEEP_KERNELS]
            note = ncu.consistent_with_timing(got, median_ms)
            if note:
                got["note"] = note
        return got


def details_csv(before: dict[str, Any] | None, after: dict[str, Any] | None, after_label: str) -> str:
    """The report folder's ncu-details.csv (either tool's rows): the kernel as written, then the best candidate,
    one row per kernel."""
    rows: list[dict[str, Any]] = []
    for side, counters in (("before", before), (after_label, after)):
        if counters and counters.get("available"):
            rows += [{"side": side, **row} for row in counters.get("kernels") or []]
    return ncu_parse.to_csv(rows)


def reading(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """Two or three sentences a reviewer reads under the before/after table: where the time goes, what
    bounds it, and how close to the hardware's peak the best candidate runs."""
    sentences = []
    for who, counters in (("The kernel as written", before), ("The best candidate", after)):
        if not counters or not counters.get("available") or not counters.get("kernels"):
            continue
        summary = counters.get("summary") or {}
        top = max(counters["kernels"], key=lambda k: k.get("duration_us") or 0.0)
        share = (top.get("duration_us") or 0.0) / (summary.get("total_us") or 1.0)
        facts = [f"DRAM at {top['dram_throughput_pct']:.0f}% of peak" if "dram_throughput_pct" in top else "",
                 f"SM at {top['sm_throughput_pct']:.0f}%" if "sm_throughput_pct" in top else "",
                 f"achieved occupancy {top['achieved_occupancy_pct']:.0f}%" if "achieved_occupancy_pct" in top else "",
                 f"limited by {top['occupancy_limiter']}" if top.get("occupancy_limiter") else "",
                 f"{top['spills']:.0f} spill instructions" if top.get("spills") else "",
                 f"mostly stalled on {top['stalls'][0]['reason']}" if top.get("stalls") else ""]
        light = summary.get("speed_of_light")
        sentences.append(f"{who} spends {share:.0%} of its device time in {code_span(str(top.get('kernel'))[:60])}, "
                         f"{summary.get('class', 'unclassified')}" + (f" at {light:.0%} of its speed of light"
                                                                     if light is not None else "")
                         + ": " + ", ".join(f for f in facts if f) + ".")
    if counters_note := (after or {}).get("note") or (before or {}).get("note"):
        sentences.append(f"Note: {counters_note}.")
    return " ".join(sentences)


def section(before: dict[str, Any] | None, after: dict[str, Any] | None, note: str = "") -> str:
    """The markdown a report or a PR body shows: the table from the counters and its reading."""
    if note:
        return f"Hardware counters were not collected: {note}."
    parts = []
    for who, counters in (("kernel as written", before), ("best candidate", after)):
        if counters and not counters.get("available"):
            parts.append(f"No counters for the {who}: {counters.get('reason')}.")
    b = before.get("kernels") if before and before.get("available") else None
    a = after.get("kernels") if after and after.get("available") else None
    if b or a:
        table = ncu_parse.table(b if a else None, a or b or [])
        parts = [table, reading(before, after)] + parts
    return "\n\n".join(p for p in parts if p)
