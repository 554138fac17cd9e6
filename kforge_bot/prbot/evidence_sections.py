"""The follow-up PR's sections below its claim: the table of targets, workloads, shape sets and baselines, and the
<details> parts (correctness, profile, how it was found, reproduce). Text a pull request, a kernel or a model wrote
goes in code spans; code goes in fences longer than any backtick run inside it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kforge_bot.prbot.evidence_rows import (NA, KernelEvidence, TargetRow, WorkloadRow, fmt_roofline, fmt_speedup,
                                            fmt_workload_speedup, rate)
from kforge_bot.text import code_span, fmt_time, markdown_cell, markdown_text, three_figures

def fence(text: str, lang: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def truncate(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit)]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return f"{cut}\n... ({what} cut: {len(text) - len(cut)} more characters; the full text is in the job's artifacts)"


def target_cell(row: TargetRow) -> str:
    labels = f" ({code_span('[' + ', '.join(row.runner_labels) + ']')})" if row.runner_labels else ""
    return markdown_cell(f"{row.target}{labels}")


def details_section(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n</details>"


def render_table(rows: Sequence[TargetRow], extra: Mapping[str, str] | None = None) -> str:
    head = "| target | before | after | speedup (95% interval) | roofline |"
    sep = "|---|---|---|---|---|"
    if extra is not None:
        head += " result |"
        sep += "---|"
    lines = [head, sep]
    for r in rows:
        line = (f"| {target_cell(r)} | {fmt_time(r.baseline_ms)} | {fmt_time(r.candidate_ms)} | "
                f"{fmt_speedup(r)} | {markdown_cell(fmt_roofline(r))} |")
        if extra is not None:
            line += f" {markdown_cell(extra.get(r.target, NA))} |"
        lines.append(line)
    if any(r.directions for r in rows):
        lines += ["", "By direction (the speedup above is forward+backward):", "",
                  "| target | forward | backward | forward+backward |", "|---|---|---|---|"]
        for r in rows:
            cells = []
            for name in ("forward", "backward", "forward+backward"):
                f = r.directions.get(name) or {}
                ci = f.get("speedup_ci")
                cells.append(NA if f.get("speedup") is None else
                             f"{f['speedup']:.2f}x" + (f" ({ci[0]:.2f}-{ci[1]:.2f})" if ci else ""))
            lines.append(f"| {target_cell(r)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_workloads(rows: Sequence[WorkloadRow]) -> str:
    """Beside the kernel's table: each workload that uses the kernel, end to end with the candidate ("" where
    none). Names and reasons come from the repository, so they are code spans and escaped text."""
    if not rows:
        return ""
    lines = ["End to end: the workloads that use this kernel (the base branch's programs), the kernel as written "
             "against the candidate, each in a fresh process, timed in alternating pairs of samples of many calls:",
             "", "| workload | target | before | after | speedup (95% interval) | pairs | verdict |",
             "|---|---|---|---|---|---|---|"]
    for w in rows:
        verdict = w.verdict if w.verdict in ("improved", "pass") or not w.reason else f"{w.verdict}: {w.reason}"
        lines.append(f"| {markdown_cell(code_span(w.name))} | {markdown_cell(w.target)} | "
                     f"{markdown_cell(rate(w.before, w.unit))} | {markdown_cell(rate(w.after, w.unit))} | "
                     f"{fmt_workload_speedup(w)} | {w.pairs} | {markdown_cell(markdown_text(verdict))} |")
    return "\n".join(lines)


def render_shapes(rows: Sequence[TargetRow]) -> str:
    """Beside the table: each target's speedup on each shape set (the headline is their geometric mean), judged by
    the one rule (a set slower than its threshold is a regression). Empty with one shape set everywhere."""
    if not any(len(r.shapes) > 1 for r in rows):
        return ""
    lines = ["Per shape set (the speedup above is the geometric mean of these):", "",
             "| target | shape set | before | after | speedup (95% interval) | verdict |", "|---|---|---|---|---|---|"]
    for r in rows:
        for shape in r.shapes:
            params = ", ".join(f"{k}={v}" for k, v in (shape.get("shape") or {}).items())
            ci = shape.get("speedup_ci")
            speed = (f"{shape['speedup']:.2f}x ({ci[0]:.2f}-{ci[1]:.2f})" if ci else f"{shape['speedup']:.2f}x "
                     "(interval n/a)") if shape.get("speedup") is not None else NA
            verdict = "informational" if shape.get("informational") else str(shape.get("status", NA))
            label = f"{shape.get('shape_set')}" + (f" ({params})" if params else "")
            lines.append(f"| {target_cell(r)} | {markdown_cell(markdown_text(label))} | {fmt_time(shape.get('baseline_ms'))} | "
                         f"{fmt_time(shape.get('candidate_ms'))} | {speed} | {verdict} |")
    return "\n".join(lines)


def render_baselines(rows: Sequence[TargetRow]) -> str:
    """Which baseline each figure is against, where other baselines than eager were measured ("" where none)."""
    lines = []
    for r in rows:
        for against, speedup, low, high in r.baselines:
            ci = f" ({three_figures(low)}-{three_figures(high)})" if low is not None and high is not None else ""
            lines.append(f"- {markdown_text(r.target)}: {speedup:.2f}x{ci} against {markdown_text(against)}")
    if not lines:
        return ""
    return ("\n\nThe speedups in the table are against eager (the kernel as written, timed in the same run). "
            "Against the other baselines the policy asks for:\n" + "\n".join(lines))


_CORRECTNESS_KEYS = [
    ("seeds", "Seeds"), ("shape_sets", "Shape sets"), ("dtypes", "Dtypes"), ("cases_checked", "Cases checked"),
    ("timed_outputs_checked", "Timed outputs re-verified"), ("tolerance", "Tolerance"),
    ("tolerance_reason", "Why this tolerance"), ("max_abs_error", "Largest absolute error"),
    ("max_rel_error", "Largest relative error"), ("max_rel_norm_error", "Largest relative norm error"),
    ("checks", "Checks passed"),
]


_CORRECTNESS_SKIP = {"records", "ok", "status", "reason"}


def _value(v: Any) -> str:
    if v is None:
        return NA
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={_value(x)}" for k, x in v.items()) or NA
    if isinstance(v, (list, tuple)):
        if len(v) > 12:
            return ", ".join(_value(x) for x in v[:12]) + f", ... ({len(v)} in all)"
        return ", ".join(_value(x) for x in v) or NA
    return str(v)


def render_correctness(correctness: Mapping[str, Any], rows: Sequence[TargetRow] = ()) -> str:
    if not correctness:
        return "No correctness record was attached to this result (n/a)."
    lines = []
    if "ok" in correctness:
        verdict = "passed" if correctness["ok"] else f"FAILED: {correctness.get('reason', NA)}"
        lines.append(f"- Result: {markdown_text(verdict)}")
    for key, label in _CORRECTNESS_KEYS:
        if key in correctness:
            lines.append(f"- {label}: {markdown_text(_value(correctness[key]))}")
    for key, value in correctness.items():
        if key not in dict(_CORRECTNESS_KEYS) and key not in _CORRECTNESS_SKIP:
            lines.append(f"- {markdown_text(key)}: {markdown_text(_value(value))}")
    per_target = [f"{r.target}: {'correct' if r.correct else 'INCORRECT' if r.correct is False else NA}"
                  for r in rows]
    if per_target:
        lines.append(f"- Per target: {', '.join(per_target)}")
    return "\n".join(lines)


def render_profile(outcome: KernelEvidence, limit: int | None = None) -> str:
    """Both profiles in code blocks; each cut to `limit` characters before fencing, so the
    Markdown around them stays intact."""
    parts = []
    if outcome.counters:
        counters = truncate(outcome.counters, limit, "counters") if limit is not None else outcome.counters
        parts.append(f"**Hardware counters ({outcome.counters_tool}), before and after**\n\n{counters}")
    for title, text in (("Before (baseline)", outcome.profile_before), ("After (candidate)", outcome.profile_after)):
        if text and limit is not None:
            text = truncate(text, limit, "profile")
        parts.append(f"**{title}**\n\n{fence(text) if text else NA}")
    if outcome.analyst_note:
        parts.append(f"**The analyst's reading:** {markdown_text(outcome.analyst_note)}")
    return "\n\n".join(parts)


_HOW_KEYS = [("generator", "Generator"), ("model", "Model"), ("iterations", "Iterations"),
             ("tokens", "Tokens"), ("prompt_tokens", "Prompt tokens"), ("completion_tokens", "Completion tokens"),
             ("wall_s", "Wall time (s)"), ("stop_reason", "Stopped because")]


# What the results file keeps for the runner's own use and a PR never shows: the LLM endpoint (an internal host
# would go public) and where the reports lie on the runner (linked instead as the workflow run's artifacts).
_RUNNER_KEYS = {"endpoint", "trajectory"}


def render_how_found(how: Mapping[str, Any], run_url: str | None = None) -> str:
    if not how:
        return "No record of the search was attached (n/a)."
    lines = []
    for key, label in _HOW_KEYS:
        if key in how:
            value = how[key]
            if key == "wall_s" and isinstance(value, (int, float)):
                value = f"{value:.0f}"
            lines.append(f"- {label}: {markdown_text(_value(value))}")
    steps = how.get("steps") or []
    if steps:
        lines.append("- Accepted steps:")
        lines += [f"  {i}. {markdown_text(s)}" for i, s in enumerate(steps, 1)]
    rejected = how.get("rejected")
    if rejected:
        if isinstance(rejected, Mapping):
            lines.append("- Rejected candidates: " + ", ".join(f"{markdown_text(k)}: {markdown_text(_value(v))}"
                                                                for k, v in rejected.items()))
        else:
            lines.append("- Rejected candidates:")
            lines += [f"  - {markdown_text(r)}" for r in rejected]
    known = {k for k, _ in _HOW_KEYS} | {"steps", "rejected"} | _RUNNER_KEYS
    for key, value in how.items():
        if key not in known:
            lines.append(f"- {markdown_text(key)}: {markdown_text(_value(value))}")
    if "trajectory" in how:
        where = f"[this workflow run]({run_url})" if run_url else "the workflow run"
        lines.append(f"- Reports (`report.md`, `trajectory.jsonl`, the candidates): the `kforge-reports-*` artifacts "
                     f"of {where}")
    return "\n".join(lines)


def render_reproduce(outcome: KernelEvidence) -> str:
    candidate = outcome.candidate_path or outcome.file
    local = f"candidate_{marker_safe(outcome.kernel)}{'.' + outcome.file.rsplit('.', 1)[-1] if '.' in outcome.file else ''}"
    lines = []
    if outcome.branch:
        lines += [f"git fetch origin {outcome.branch}", f"git show FETCH_HEAD:{candidate} > {local}"]
    else:
        local = "<the candidate file>"
    kinds = sorted({r.target_kind for r in outcome.targets if r.target_kind}) or ["<cuda|xpu|cpu>"]
    lines += [f"kforge-bot check {outcome.file} --candidate {local} --target {k}" for k in kinds]
    return fence("\n".join(lines))


def marker_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._/,:+-]", "-", str(text))
