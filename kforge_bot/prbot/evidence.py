"""Markdown for the follow-up PR, the comment on the original PR and the job summary.

Pure functions of plain data (`KernelEvidence`, JSON-friendly), following EVIDENCE.md: short at the
top (one claim sentence and a table), complete below (<details> sections for correctness, profile,
how it was found, reproduce), a hidden marker at the end. Every claim is derived from the data;
missing data is shown as "n/a", never filled in. Text that a pull request, a kernel or a model wrote (names,
reasons, values, a model's notes) goes in code spans (`kforge_bot.text.code_span`), so it renders no link,
image, mention or HTML; code goes in fences longer than any backtick run inside it. Nothing here names the
runner: no endpoint URL, no runner path (the run's reports are linked as the workflow run's artifacts).
GitHub caps a PR body or comment at 65536 characters: long sections are cut, saying so. The data is in
`evidence_rows`, the sections below the claim in `evidence_sections`; this module puts them together.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kforge_bot.prbot.evidence_rows import (NA, KernelEvidence, TargetRow, WorkloadRow, fmt_roofline, fmt_speedup,
                                            fmt_workload_speedup)
from kforge_bot.prbot.evidence_sections import (details_section, fence, render_baselines, render_correctness,
                                                render_how_found, render_profile, render_reproduce, render_shapes,
                                                marker_safe, render_table, render_workloads, target_cell, truncate)
from kforge_bot.text import clip, code_span, fmt_time, markdown_cell, markdown_text

MAX_BODY = 65536
_BUDGET = 60000  # headroom under GitHub's limit for the marker and the caller's additions



# -- markers ---------------------------------------------------------------------------------

def pr_marker(pr_number: int, kernel: str, targets: Iterable[str], harness: str | None = None) -> str:
    fields = [f"pr={int(pr_number)}", f"kernel={marker_safe(kernel)}",
              f"targets={marker_safe(','.join(targets)) or '-'}"]
    if harness:
        fields.append(f"harness={marker_safe(harness)}")
    return f"<!-- kforge-bot: {' '.join(fields)} -->"


def comment_marker(pr_number: int) -> str:
    return f"<!-- kforge-bot:summary pr={int(pr_number)} -->"


# -- the follow-up PR --------------------------------------------------------------------------

def render_title(outcome: KernelEvidence) -> str:
    """`kforge: rmsnorm 1.80x faster on b200, 1.30x on arc-b580` (only measured speedups)."""
    parts = [f"{r.speedup:.2f}x{' faster' if i == 0 else ''} on {r.target}"
             for i, r in enumerate([r for r in outcome.targets if r.speedup is not None])]
    name = markdown_text(outcome.kernel)  # GH-1 or a commit-like name GitHub would link: quoted
    title = f"kforge: {name} {', '.join(parts)}" if parts else f"kforge: new {name} candidate (not timed)"
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


def _workload_claim(rows: Sequence[WorkloadRow]) -> str:
    """One sentence on the workloads, backed by their rows ("" where none was measured)."""
    if not rows:
        return ""
    gained = [code_span(w.name) for w in rows if w.gain]
    rest = [code_span(w.name) for w in rows if not w.gain]
    if not rest:
        return f" End to end, {', '.join(gained)} {'is' if len(gained) == 1 else 'are'} faster with it too."
    said = f"{', '.join(gained)} faster; " if gained else ""
    return f" End to end: {said}{', '.join(rest)} not measurably faster with it (see the workloads below)."


def render_pr_body(outcome: KernelEvidence, *, pr_number: int, head_branch: str, harness: str | None = None,
                   limit: int = _BUDGET, run_url: str | None = None) -> str:
    """The follow-up PR's body: claim, table, details, commands, marker; at most `limit` characters."""
    found = "a faster" if any(r.faster for r in outcome.targets) else "a candidate"
    intro = (f"kforge-bot found {found} {code_span(outcome.kernel)} for #{int(pr_number)} ({code_span(outcome.file)}). "
             f"{_claim(outcome)}{_workload_claim(outcome.workloads)} Merge this PR into {code_span(head_branch)} to "
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
    correctness = details_section("Correctness", render_correctness(outcome.correctness, outcome.targets))
    how = details_section("How it was found", render_how_found(outcome.how_found, run_url))
    reproduce = details_section("Reproduce", render_reproduce(outcome))
    # What is left after the fixed parts goes to the profile, then the diff.
    room = limit - sum(len(p) + 2 for p in (intro, table, correctness, how, reproduce, commands, marker)) - 200
    profile_room = max(2000, room // 2 if outcome.diff else room)
    profile = details_section("Profile: before and after", render_profile(outcome, limit=profile_room // 2 - 200))
    diff = ""
    if outcome.diff:
        room -= len(profile)
        text = outcome.diff if len(outcome.diff) <= room else truncate(outcome.diff, max(0, room - 200), "diff")
        diff = details_section("Diff", fence(text, "diff"))
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
    return ", ".join(f"end to end {code_span(w.name)} {fmt_workload_speedup(w)}" for w in outcome.workloads)


def render_comment_line(outcome: KernelEvidence) -> str:
    head = f"- {code_span(outcome.kernel)} ({code_span(outcome.file)})"
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
            lines.append(f"| {markdown_cell(code_span(o.kernel))} | {target_cell(r)} | {fmt_time(r.baseline_ms)} | "
                         f"{fmt_time(r.candidate_ms)} | {fmt_speedup(r)} | {markdown_cell(fmt_roofline(r))} | "
                         f"{markdown_cell(result)} |")
    shapes = [render_shapes(o.targets) for o in outcomes]
    lines += [f"\n{code_span(o.kernel)}: {text}" for o, text in zip(outcomes, shapes) if text]
    lines += [f"\n{code_span(o.kernel)}: {render_workloads(o.workloads)}" for o in outcomes if o.workloads]
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
