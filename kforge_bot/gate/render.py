"""The gate's report as people and GitHub read it: a console table (or a line per kernel into a log), the job
summary's Markdown, workflow-command annotations on the failing kernels' files and the commit status."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kforge_bot.gate.decision import FAILING, GATE_VERDICTS, fmt_threshold
from kforge_bot.gate.report import GateReport, KernelReport
from kforge_bot.text import clip, fmt_time, markdown_cell, markdown_text


def _ms(value: float | None) -> str:
    return fmt_time(value) if value is not None else "-"


def _notes(k: KernelReport) -> str:
    bits = []
    if k.cached:
        bits.append("cache hit")
    if k.new:
        bits.append("new")
    if k.confirmed:
        bits.append("confirmed")
    if k.directions:  # a kernel with a backward: each direction's change (the table's is forward+backward)
        bits.append(", ".join(f"{name} {k.directions[name]['change']}" for name in ("forward", "backward")
                              if name in k.directions))
    if k.conditions:  # how many threads each side kept busy, and what disturbed the timing
        bits.append(k.conditions)
    return ", ".join(bits)


def _required_note(k: KernelReport, strict: bool) -> str:
    """'required cuda: skipped (needs cuda)' for each required target this run did not measure."""
    suffix = " - fails the gate (require_all_targets)" if strict else ""
    return "; ".join(f"required {t}: {k.required[t]}{suffix}" for t in k.unmeasured_required)


def required_lines(report: GateReport) -> list[str]:
    """What happened to the policy's required targets, in one or two sentences (and first, where every changed
    kernel was skipped and the policy makes that fail, the one line saying so)."""
    nothing = report.nothing_measured()
    if not report.required_targets:
        return [f"Error: {nothing}"] if nothing else []
    if nothing:
        return [f"Error: {nothing}", *required_lines(replace(report, all_skipped="pass"))]
    missing = report.unmeasured_required()
    head = f"Required targets (policy): {', '.join(report.required_targets)}."
    if not missing:
        return [head + " Every changed kernel that runs on them was measured on them here."
                if report.kernels else head]
    parts = [f"{t} for {', '.join(ids)}" for t, ids in missing.items()]
    if report.require_all_targets:
        tail = "this fails the gate (require_all_targets)."
    else:
        tail = ("this does not fail the run; a runner with that device must measure them "
                "(--require-all-targets or gate.require_all_targets: true makes it fail).")
    return [head, f"Not measured on this runner: {'; '.join(parts)}: {tail}"]


def headline(report: GateReport) -> str:
    counts = report.counts()
    parts = [f"{n} {v}" for v, n in counts.items() if n]
    measured = ", ".join(parts) if parts else "no changed kernel"
    missing = report.unmeasured_required()
    if missing:
        measured += "; required target(s) not measured here: " + ", ".join(missing)
    devices = "; ".join(f"{kind}: {fp['device_name']}" for kind, fp in report.targets.items())
    return (f"{measured} (base {report.base_sha[:10]}, head {report.head_sha[:10]}"
            + (f", {devices}" if devices else "") + ")")


def table_rows(report: GateReport, quote: Callable[[str], str] = str) -> list[list[str]]:
    """A row per kernel, and under a kernel of several shape sets a row per set (each judged on its own); `quote`
    renders the reason and each shape set's label, which can hold what the change wrote (code_span in Markdown)."""
    rows = []
    for k in report.kernels:
        notes = (_notes(k), quote(k.reason) if k.reason else "", _required_note(k, report.require_all_targets))
        name = k.name if k.name == k.id else f"{k.name} ({k.id})"
        several = len(k.shapes) > 1
        rows.append([name, _ms(k.base_ms), _ms(k.head_ms), k.change + (" (geometric mean)" if several else ""),
                     fmt_threshold(k.threshold, k.target), k.verdict, "; ".join(b for b in notes if b)])
        for shape in k.shapes if several else ():
            rows.append([f"{name}, {quote(shape_label(shape))}", _ms(shape.get("baseline_ms")),
                         _ms(shape.get("candidate_ms")),
                         str(shape.get("change", "n/a")), fmt_threshold(shape.get("threshold"), k.target),
                         shape_verdict(shape), f"{shape.get('pairs', 0)} pairs"])
    for w in report.workloads:  # each a row of its own (kforge_bot.workloads.gate)
        notes = "; ".join(b for b in (quote(w.reason) if w.reason else "",
                                      f"noise floor {w.noise_floor:.2%}" if w.noise_floor is not None else "") if b)
        rows.append([f"workload {w.name}", _rate(w.base_rate, w.unit), _rate(w.head_rate, w.unit), w.change,
                     fmt_threshold(w.threshold, w.target), w.verdict, notes])
    return rows


def _rate(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:.4g} {unit}"


def shape_label(shape: dict) -> str:
    """'shape set 1 (n=16)' from a KernelReport's shape entry."""
    params = ", ".join(f"{key}={value}" for key, value in (shape.get("shape") or {}).items())
    return f"shape set {shape.get('shape_set')}" + (f" ({params})" if params else "")


def shape_verdict(shape: dict) -> str:
    """The one rule's word on a shape set, in the gate's verdicts: regression, improved, pass, uncertain."""
    if shape.get("informational"):
        return "informational"
    return str(shape.get("status", "n/a"))


TABLE_HEADER = ["kernel", "base", "head", "change (interval)", "threshold", "verdict", "notes"]
SHAPES_NOTE = ("With several shape sets each set is judged on its own (a set slower than its threshold fails the "
               "kernel); the kernel's base and head are the geometric means of the sets' medians, its change the "
               "geometric mean of the sets' changes.")
VERDICT_COLUMN = TABLE_HEADER.index("verdict")
NOTES_COLUMN = TABLE_HEADER.index("notes")


def render_markdown(report: GateReport) -> str:
    """The report as the job summary's Markdown: what the change wrote is quoted (markdown_text)."""
    failed = report.exit_code != 0
    lines = [f"### kforge-bot gate: {'failed' if failed else 'passed'}", "", headline(report), ""]
    if report.kernels or report.workloads:
        lines.append("| " + " | ".join(TABLE_HEADER) + " |")
        lines.append("|" + "---|" * len(TABLE_HEADER))
        for row in table_rows(report, markdown_text):
            verdict = row[VERDICT_COLUMN]
            row[VERDICT_COLUMN] = f"**{verdict}**" if verdict in FAILING else verdict
            lines.append("| " + " | ".join(markdown_cell(c) for c in row) + " |")
        lines.append("")
    lines.append(f"Change = head time / base time - 1 (positive: slower), with the policy's confidence interval. "
                 f"Threshold = the slowdown that counts as a regression on that target (policy `gate.threshold`). "
                 f"{SHAPES_NOTE}")
    lines.extend(required_lines(report))
    if report.unchanged:
        lines.append(f"{len(report.unchanged)} managed kernel(s) unchanged by this change: not measured.")
    if report.removed:
        lines.append(f"Removed in head: {', '.join(report.removed)}.")
    for note in report.notes:
        lines.append(f"Note: {markdown_text(note)}")
    return "\n".join(lines) + "\n"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation_lines(report: GateReport, workspace: str | None = None) -> list[str]:
    """GitHub Actions `::error` workflow commands, one per failing kernel, on its file. Paths are made
    relative to `workspace` (GITHUB_WORKSPACE) when the repository is checked out below it."""
    prefix = ""
    if workspace:
        try:
            inner = Path(report.repo).resolve().relative_to(Path(workspace).resolve()).as_posix()
            prefix = "" if inner == "." else f"{inner}/"
        except ValueError:
            prefix = ""
    out = []
    for k in report.kernels:
        path = _escape_property(prefix + k.file)
        if k.verdict in FAILING:
            title = f"kforge gate: {k.name} {k.verdict}"
            message = f"{k.name}: {k.verdict}: {k.reason}"
            if k.base_ms is not None and k.head_ms is not None:
                mean = "geometric means over the shape sets: " if len(k.shapes) > 1 else ""
                message += (f" ({mean}base {_ms(k.base_ms)}, head {_ms(k.head_ms)}, "
                            f"threshold {fmt_threshold(k.threshold, k.target)})")
            if len(k.shapes) > 1:
                message += "\nPer shape set:" + "".join(
                    f"\n- {shape_label(s)}: {shape_verdict(s)}: change {s.get('change', 'n/a')}, base "
                    f"{_ms(s.get('baseline_ms'))}, head {_ms(s.get('candidate_ms'))}, threshold "
                    f"{fmt_threshold(s.get('threshold'), k.target)}" for s in k.shapes)
            out.append(f"::error file={path},title={_escape_property(title)}::{escape_data(message)}")
        if k.unmeasured_required:
            # An error only when it fails the run; otherwise a warning, so that nobody mistakes a
            # pass on this runner for a measurement on the required one.
            level = "error" if report.require_all_targets else "warning"
            title = f"kforge gate: {k.name} not measured on {', '.join(k.unmeasured_required)}"
            message = f"{k.name}: {_required_note(k, report.require_all_targets)}"
            out.append(f"::{level} file={path},title={_escape_property(title)}::{escape_data(message)}")
    return out


def status_for(report: GateReport) -> tuple[str, str]:
    """(state, description) for the commit status."""
    counts = report.counts()
    state = "failure" if report.exit_code else "success"
    parts = [f"{counts[v]} {v}" for v in GATE_VERDICTS if counts[v]]
    text = ", ".join(parts) if parts else "no changed kernel"
    missing = report.unmeasured_required()
    if missing:
        text += "; not measured: " + ", ".join(missing)
    return state, f"kforge gate: {text}"[:140]  # GitHub's limit for a status description


def render_console(report: GateReport, console: Console) -> None:
    """The report on `console`: a table on a terminal, one whole line per kernel into a log."""
    failed = report.exit_code != 0
    console.print(f"[bold]kforge-bot gate: {'[red]failed[/red]' if failed else '[green]passed[/green]'}[/bold] "
                  f"- {headline(report)}")
    if (report.kernels or report.workloads) and not console.is_terminal:
        # Into a log: one whole line per kernel (greppable, never folded), not a table padded to a width.
        for row in table_rows(report):
            cells = dict(zip(TABLE_HEADER, row))
            console.print(f"{cells['kernel']}: {cells['verdict']}: change {cells['change (interval)']}, threshold "
                          f"{cells['threshold']}, base {cells['base']}, head {cells['head']}"
                          + (f"; {cells['notes']}" if cells["notes"] else ""), markup=False, soft_wrap=True)
        console.print("change = head time / base time - 1 (positive: slower), with the policy's confidence interval; "
                      "threshold = the slowdown that counts as a regression on that target. " + SHAPES_NOTE,
                      soft_wrap=True)
    elif report.kernels or report.workloads:
        table = Table(show_header=True, header_style="bold")
        for col in TABLE_HEADER:
            table.add_column(col, overflow="fold")
        for row in table_rows(report):
            verdict = row[VERDICT_COLUMN]
            color = "red" if verdict in FAILING else "green" if verdict in ("pass", "improved") else "yellow"
            row[VERDICT_COLUMN] = f"[{color}]{verdict}[/{color}]"
            notes = row[NOTES_COLUMN]
            row[NOTES_COLUMN] = escape(clip(notes, 200))  # the full reason is in the JSON; a reason is not markup
            table.add_row(*[c if i == VERDICT_COLUMN else escape(c) if i != NOTES_COLUMN else c
                            for i, c in enumerate(row)])
        console.print(table)
        console.print("change = head time / base time - 1 (positive: slower), with the policy's confidence interval; "
                      "threshold = the slowdown that counts as a regression on that target. " + SHAPES_NOTE)
    for line in required_lines(report):
        console.print(line, markup=False)
    if report.unchanged:
        console.print(f"{len(report.unchanged)} managed kernel(s) unchanged by this change: not measured")
    if report.removed:
        console.print(f"removed in head: {', '.join(report.removed)}")
    for note in report.notes:
        console.print(f"note: {note}", markup=False)
