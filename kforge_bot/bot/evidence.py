"""Markdown for the follow-up PR, the comment on the original PR and the job summary.

Pure functions of plain data (`KernelEvidence`, JSON-friendly), following EVIDENCE.md: short at the
top (one claim sentence and a table), complete below (<details> sections for correctness, profile,
how it was found, reproduce), a hidden marker at the end. Every claim is derived from the data;
missing data is shown as "n/a", never filled in. Text that a pull request, a kernel or a model wrote (names,
reasons, values, a model's notes) goes in code spans (`kforge_bot.text.code_span`), so it renders no link,
image, mention or HTML; code goes in fences longer than any backtick run inside it. Nothing here names the
runner: no endpoint URL, no runner path (the run's reports are linked as the workflow run's artifacts).
GitHub caps a PR body or comment at 65536 characters: long sections are cut, saying so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kforge_bot.text import clip, code_span, fmt_time, markdown_cell, markdown_text, three_figures

NA = "n/a"
MAX_BODY = 65536
_BUDGET = 60000  # headroom under GitHub's limit for the marker and the caller's additions


@dataclass(frozen=True)
class TargetRow:
    """One target's measurement of the best candidate against the baseline (times in ms)."""

    target: str  # the hardware runner name, e.g. b200
    runner_labels: tuple[str, ...] = ()
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    roofline_before: float | None = None  # fraction of the bound ceiling, 0..1
    roofline_after: float | None = None
    roofline_bound: str | None = None  # e.g. "DRAM bandwidth"
    correct: bool | None = None
    target_kind: str | None = None  # cuda | xpu | cpu | mps, for the reproduce command
    device_name: str | None = None
    # Each shape set (kforge_bot.evaluate.wire.shapes.ShapeSpeedup.to_dict): the speedup is their geometric mean.
    shapes: tuple[Mapping[str, Any], ...] = ()
    # A kernel with a backward: {direction: {"speedup", "speedup_ci"}} for forward, backward and forward+backward
    # (the row's speedup is forward+backward's).
    directions: Mapping[str, Any] = field(default_factory=dict)
    # The speedup against other baselines than eager, where the policy asked for them (evaluate.baselines):
    # (what it is against, speedup, interval low, interval high); the columns above are against eager.
    baselines: tuple[tuple[str, float, float | None, float | None], ...] = ()

    @property
    def faster(self) -> bool:
        """Faster with confidence: the whole interval above 1."""
        return self.ci_low is not None and self.ci_low > 1.0


@dataclass(frozen=True)
class WorkloadRow:
    """One workload's end-to-end measurement of the candidate against the kernel as written (docs/workloads.md):
    the gate's verdict at its threshold, and the figures (rates in `unit`; speedup = time before / time after)."""

    name: str
    target: str
    verdict: str  # improved | pass | regression | incorrect | error
    reason: str = ""
    unit: str = ""
    before: float | None = None
    after: float | None = None
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    pairs: int = 0
    threshold: float | None = None

    @property
    def gain(self) -> bool:
        """Faster end to end with confidence: the whole interval above 1, the output the same."""
        return self.verdict in ("improved", "pass") and self.ci_low is not None and self.ci_low > 1.0


@dataclass(frozen=True)
class KernelEvidence:
    """The evidence for one kernel, as the follow-up PR, the comment and the summary show it (a `KernelOutcome`,
    kforge_bot.bot.outcomes, carries it with the candidate and the raw result)."""

    kernel: str
    file: str
    targets: tuple[TargetRow, ...] = ()
    correctness: Mapping[str, Any] = field(default_factory=dict)
    profile_before: str | None = None
    profile_after: str | None = None
    counters: str | None = None  # Markdown: the hardware counters' before/after table and reading (kforge_bot.optimize.counters)
    counters_tool: str = "Nsight Compute"  # the profiler they came from (unitrace on Intel XPU)
    analyst_note: str | None = None
    how_found: Mapping[str, Any] = field(default_factory=dict)
    diff: str | None = None
    pr_url: str | None = None
    pr_number: int | None = None
    skip_reason: str | None = None  # why no follow-up PR: no improvement, not trusted, skipped by policy, ...
    branch: str | None = None
    candidate_path: str | None = None  # where the candidate lives on `branch` (default: `file`)
    # How the kernel was judged when not simply by the base's test: new in the PR (its own), or a change to its test
    # (spec-changed: `spec_blocked` until a maintainer's label approves it).
    spec_note: str | None = None
    spec_blocked: bool = False
    # The workloads that use the kernel, end to end with the candidate (kforge_bot.workloads.candidate).
    workloads: tuple[WorkloadRow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["workloads"] = [asdict(w) for w in self.workloads]
        data["targets"] = [{**asdict(t), "runner_labels": list(t.runner_labels), "shapes": [dict(x) for x in t.shapes]}
                           for t in self.targets]
        data["correctness"] = dict(self.correctness)
        data["how_found"] = dict(self.how_found)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelEvidence:
        known = set(cls.__dataclass_fields__)
        row_known = set(TargetRow.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["targets"] = tuple(
            TargetRow(**{**{k: v for k, v in row.items() if k in row_known},
                         "runner_labels": tuple(row.get("runner_labels") or ()),
                         "shapes": tuple(row.get("shapes") or ()),
                         "baselines": tuple(tuple(b) for b in row.get("baselines") or ())})
            for row in data.get("targets") or ())
        workload_known = set(WorkloadRow.__dataclass_fields__)
        kwargs["workloads"] = tuple(WorkloadRow(**{k: v for k, v in row.items() if k in workload_known})
                                    for row in data.get("workloads") or ())
        return cls(**kwargs)


# -- formatting ------------------------------------------------------------------------------

def fmt_speedup(row: TargetRow) -> str:
    """1.80x (1.78-1.82); the interval says n/a when it was not measured."""
    if row.speedup is None:
        return NA
    ci = (f"{row.ci_low:.2f}-{row.ci_high:.2f}" if row.ci_low is not None and row.ci_high is not None
          else "interval n/a")
    return f"{row.speedup:.2f}x ({ci})"


def fmt_roofline(row: TargetRow) -> str:
    def pct(f: float | None) -> str:
        return NA if f is None else f"{100 * f:.0f}%"
    if row.roofline_before is None and row.roofline_after is None:
        return NA
    tail = f" of {row.roofline_bound}" if row.roofline_bound else ""
    return f"{pct(row.roofline_before)} -> {pct(row.roofline_after)}{tail}"


_code = code_span


def _fence(text: str, lang: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def _marker_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._/,:+-]", "-", str(text))


def _target_cell(row: TargetRow) -> str:
    labels = f" ({_code('[' + ', '.join(row.runner_labels) + ']')})" if row.runner_labels else ""
    return markdown_cell(f"{row.target}{labels}")


def _truncate(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit)]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return f"{cut}\n... ({what} cut: {len(text) - len(cut)} more characters; the full text is in the job's artifacts)"


# -- markers ---------------------------------------------------------------------------------

def pr_marker(pr_number: int, kernel: str, targets: Iterable[str], harness: str | None = None) -> str:
    fields = [f"pr={int(pr_number)}", f"kernel={_marker_safe(kernel)}",
              f"targets={_marker_safe(','.join(targets)) or '-'}"]
    if harness:
        fields.append(f"harness={_marker_safe(harness)}")
    return f"<!-- kforge-bot: {' '.join(fields)} -->"


def comment_marker(pr_number: int) -> str:
    return f"<!-- kforge-bot:summary pr={int(pr_number)} -->"


# -- the follow-up PR --------------------------------------------------------------------------

def render_title(outcome: KernelEvidence) -> str:
    """`kforge: rmsnorm 1.80x faster on b200, 1.30x on arc-b580` (only measured speedups)."""
    parts = [f"{r.speedup:.2f}x{' faster' if i == 0 else ''} on {r.target}"
             for i, r in enumerate([r for r in outcome.targets if r.speedup is not None])]
    title = f"kforge: {outcome.kernel} {', '.join(parts)}" if parts else f"kforge: new {outcome.kernel} candidate (not timed)"
    return clip(title, 250)


def _claim(outcome: KernelEvidence) -> str:
    """Correctness and speed sentences, each backed by the rows (nothing claimed without data)."""
    rows = outcome.targets
    if not rows:
        return "No target measured it, so no speed or correctness claim is made."
    wrong = [r.target for r in rows if r.correct is False]
    unknown = [r.target for r in rows if r.correct is None]
    if wrong:
        correct = f"It FAILED correctness on {', '.join(wrong)}."
    elif unknown:
        correct = f"Correctness was not recorded on {', '.join(unknown)}."
    else:
        correct = f"It is correct on every target measured ({', '.join(r.target for r in rows)})."
    faster = [r.target for r in rows if r.faster]
    unclear = [r.target for r in rows if not r.faster]
    if not unclear:
        speed = ("It is faster on each, with the whole 95% interval above 1.0." if len(rows) > 1
                 else f"It is faster on {rows[0].target}, with the whole 95% interval above 1.0.")
    else:
        speed = ((f"It is faster on {', '.join(faster)}; not" if faster else "It is not")
                 + f" measurably faster on {', '.join(unclear)} (the 95% interval reaches 1.0 or was not measured).")
    return f"{correct} {speed}"


def render_table(rows: Sequence[TargetRow], extra: Mapping[str, str] | None = None) -> str:
    head = "| target | before | after | speedup (95% interval) | roofline |"
    sep = "|---|---|---|---|---|"
    if extra is not None:
        head += " result |"
        sep += "---|"
    lines = [head, sep]
    for r in rows:
        line = (f"| {_target_cell(r)} | {fmt_time(r.baseline_ms)} | {fmt_time(r.candidate_ms)} | "
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
            lines.append(f"| {_target_cell(r)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fmt_workload_speedup(row: WorkloadRow) -> str:
    """1.04x (1.03-1.05), as the kernel's table gives its speedups."""
    if row.speedup is None:
        return NA
    ci = (f"{row.ci_low:.3f}-{row.ci_high:.3f}" if row.ci_low is not None and row.ci_high is not None
          else "interval n/a")
    return f"{row.speedup:.3f}x ({ci})"


def _rate(value: float | None, unit: str) -> str:
    return NA if value is None else f"{value:.4g} {unit}"


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
        lines.append(f"| {markdown_cell(_code(w.name))} | {markdown_cell(w.target)} | "
                     f"{markdown_cell(_rate(w.before, w.unit))} | {markdown_cell(_rate(w.after, w.unit))} | "
                     f"{fmt_workload_speedup(w)} | {w.pairs} | {markdown_cell(markdown_text(verdict))} |")
    return "\n".join(lines)


def _workload_claim(rows: Sequence[WorkloadRow]) -> str:
    """One sentence on the workloads, backed by their rows ("" where none was measured)."""
    if not rows:
        return ""
    gained = [_code(w.name) for w in rows if w.gain]
    rest = [_code(w.name) for w in rows if not w.gain]
    if not rest:
        return f" End to end, {', '.join(gained)} {'is' if len(gained) == 1 else 'are'} faster with it too."
    said = f"{', '.join(gained)} faster; " if gained else ""
    return f" End to end: {said}{', '.join(rest)} not measurably faster with it (see the workloads below)."


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
            lines.append(f"| {_target_cell(r)} | {markdown_cell(markdown_text(label))} | {fmt_time(shape.get('baseline_ms'))} | "
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
        counters = _truncate(outcome.counters, limit, "counters") if limit is not None else outcome.counters
        parts.append(f"**Hardware counters ({outcome.counters_tool}), before and after**\n\n{counters}")
    for title, text in (("Before (baseline)", outcome.profile_before), ("After (candidate)", outcome.profile_after)):
        if text and limit is not None:
            text = _truncate(text, limit, "profile")
        parts.append(f"**{title}**\n\n{_fence(text) if text else NA}")
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
    local = f"candidate_{_marker_safe(outcome.kernel)}{'.' + outcome.file.rsplit('.', 1)[-1] if '.' in outcome.file else ''}"
    lines = []
    if outcome.branch:
        lines += [f"git fetch origin {outcome.branch}", f"git show FETCH_HEAD:{candidate} > {local}"]
    else:
        local = "<the candidate file>"
    kinds = sorted({r.target_kind for r in outcome.targets if r.target_kind}) or ["<cuda|xpu|cpu>"]
    lines += [f"kforge-bot check {outcome.file} --candidate {local} --target {k}" for k in kinds]
    return _fence("\n".join(lines))


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n</details>"


def render_pr_body(outcome: KernelEvidence, *, pr_number: int, head_branch: str, harness: str | None = None,
                   limit: int = _BUDGET, run_url: str | None = None) -> str:
    """The follow-up PR's body: claim, table, details, commands, marker; at most `limit` characters."""
    found = "a faster" if any(r.faster for r in outcome.targets) else "a candidate"
    intro = (f"kforge-bot found {found} {_code(outcome.kernel)} for #{int(pr_number)} ({_code(outcome.file)}). "
             f"{_claim(outcome)}{_workload_claim(outcome.workloads)} Merge this PR into {_code(head_branch)} to "
             "take it.")
    if outcome.spec_note:
        intro += f" Note: {markdown_text(outcome.spec_note)}."
    table = render_table(outcome.targets) if outcome.targets else "No timings were recorded (n/a)."
    table += render_baselines(outcome.targets)
    for extra in (render_shapes(outcome.targets), render_workloads(outcome.workloads)):
        if extra:
            table += "\n\n" + extra
    commands = ("Commands: comment `/kforge retry` to run again, `/kforge stop` to close this PR and stop "
                "suggesting for this kernel. A push to this branch by anyone but kforge-bot stops its updates.")
    marker = pr_marker(pr_number, outcome.kernel, [r.target for r in outcome.targets], harness)
    correctness = _details("Correctness", render_correctness(outcome.correctness, outcome.targets))
    how = _details("How it was found", render_how_found(outcome.how_found, run_url))
    reproduce = _details("Reproduce", render_reproduce(outcome))
    # What is left after the fixed parts goes to the profile, then the diff.
    room = limit - sum(len(p) + 2 for p in (intro, table, correctness, how, reproduce, commands, marker)) - 200
    profile_room = max(2000, room // 2 if outcome.diff else room)
    profile = _details("Profile: before and after", render_profile(outcome, limit=profile_room // 2 - 200))
    diff = ""
    if outcome.diff:
        room -= len(profile)
        text = outcome.diff if len(outcome.diff) <= room else _truncate(outcome.diff, max(0, room - 200), "diff")
        diff = _details("Diff", _fence(text, "diff"))
    fixed = [intro, table, correctness, profile, how, reproduce, diff, commands, marker]
    body = "\n\n".join(p for p in fixed if p) + "\n"
    if len(body) > MAX_BODY:  # the fixed parts alone were too long: cut hard, keep the marker
        body = body[: MAX_BODY - len(marker) - 100] + "\n\n... (cut to GitHub's size limit)\n\n" + marker + "\n"
    return body


# -- the comment on the original PR and the job summary ------------------------------------------

def _speeds(outcome: KernelEvidence) -> str:
    parts = []
    for r in outcome.targets:
        if r.speedup is None:
            parts.append(f"{r.target}: {NA}")
        else:
            ci = f" ({r.ci_low:.2f}-{r.ci_high:.2f})" if r.ci_low is not None and r.ci_high is not None else ""
            parts.append(f"{r.speedup:.2f}x on {r.target}{ci}")
    return ", ".join(parts)


def _workload_speeds(outcome: KernelEvidence) -> str:
    return ", ".join(f"end to end {_code(w.name)} {fmt_workload_speedup(w)}" for w in outcome.workloads)


def render_comment_line(outcome: KernelEvidence) -> str:
    head = f"- {_code(outcome.kernel)} ({_code(outcome.file)})"
    speeds = "; ".join(part for part in (_speeds(outcome), _workload_speeds(outcome)) if part)
    if outcome.pr_url:
        ref = f"#{outcome.pr_number}" if outcome.pr_number else "follow-up PR"
        said = f" ({markdown_text(outcome.spec_note)})" if outcome.spec_note else ""
        return f"{head}: {speeds or 'no timings (n/a)'} -> [{ref}]({outcome.pr_url}){said}"
    reason = markdown_text(outcome.skip_reason or "reason not recorded")
    best = f" (measured: {speeds})" if speeds else ""
    said = f"; {markdown_text(outcome.spec_note)}" if outcome.spec_note and not outcome.spec_blocked else ""
    return f"{head}: no follow-up PR: {reason}{best}{said}"


def render_comment(outcomes: Sequence[KernelEvidence], *, pr_number: int, note: str | None = None) -> str:
    """The one comment on the original PR: one line per kernel, updated in place (marker at the end)."""
    lines = ["**kforge-bot**" + (f": {markdown_text(note)}" if note else "")]
    if outcomes:
        lines.append("")
        lines += [render_comment_line(o) for o in outcomes]
    elif not note:
        lines.append("")
        lines.append("No kernels changed in this PR.")
    lines += ["", "Comment `/kforge retry` to run again, `/kforge stop` to stop.", "", comment_marker(pr_number)]
    return "\n".join(lines) + "\n"


def render_summary(outcomes: Sequence[KernelEvidence], *, title: str = "kforge-bot", note: str | None = None) -> str:
    """The job summary (GITHUB_STEP_SUMMARY): the table of every kernel and target, with the result."""
    lines = [f"### {markdown_cell(title)}", ""]
    if note:
        lines += [markdown_text(note), ""]
    if not outcomes:
        lines.append("No kernels were evaluated.")
        return "\n".join(lines) + "\n"
    lines += ["| kernel | target | before | after | speedup (95% interval) | roofline | result |",
              "|---|---|---|---|---|---|---|"]
    for o in outcomes:
        result = (f"[#{o.pr_number}]({o.pr_url})" if o.pr_url and o.pr_number else o.pr_url
                  or "no PR: " + markdown_text(o.skip_reason or "reason not recorded"))
        for r in o.targets or (TargetRow(target=NA),):
            lines.append(f"| {markdown_cell(_code(o.kernel))} | {_target_cell(r)} | {fmt_time(r.baseline_ms)} | "
                         f"{fmt_time(r.candidate_ms)} | {fmt_speedup(r)} | {markdown_cell(fmt_roofline(r))} | "
                         f"{markdown_cell(result)} |")
    shapes = [render_shapes(o.targets) for o in outcomes]
    lines += [f"\n{_code(o.kernel)}: {text}" for o, text in zip(outcomes, shapes) if text]
    lines += [f"\n{_code(o.kernel)}: {render_workloads(o.workloads)}" for o in outcomes if o.workloads]
    return "\n".join(lines) + "\n"


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def status_description(outcomes: Sequence[KernelEvidence], note: str | None = None) -> str:
    """At most 140 characters for the commit status."""
    if note and not outcomes:
        text = note
    else:
        opened = [o for o in outcomes if o.pr_url]
        text = f"{len(outcomes)} kernel{_s(len(outcomes))}: {len(opened)} follow-up PR{_s(len(opened))}"
        if opened:
            text += " (" + ", ".join(f"#{o.pr_number}" for o in opened if o.pr_number) + ")"
        rest = len(outcomes) - len(opened)
        if rest:
            text += f", {rest} without"
    return clip(text, 140)  # GitHub's limit for a status description
