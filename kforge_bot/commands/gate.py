"""`kforge-bot gate --base REF`: the performance and correctness regression gate for CI.

Exit codes: 0 nothing regressed or broke, 1 a kernel regressed, became incorrect or errors (or, with
`--require-all-targets` / the policy's `gate.require_all_targets`, a required target could not be
measured on this runner), 2 usage or configuration error. Without that flag a required target this
runner lacks is reported as `skipped (needs cuda)` and does not fail the run. The decision rule is
documented in `kforge_bot/gate/__init__.py`.
"""

from __future__ import annotations

from dataclasses import replace

import json
from collections.abc import Callable
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from kforge_bot import gitops
from kforge_bot.github.client import GitHub
from kforge_bot.commands import examples, json_option, output_console, timing_budget_option, write_json
from kforge_bot.config.policy import load_policy_from_base
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.isolation import announcement
from kforge_bot.gate.decision import FAILING, VERDICTS, fmt_threshold
from kforge_bot.gate.report import GateReport, KernelReport
from kforge_bot.gate.run import repo_root, run_gate
from kforge_bot.github import events, trust
from kforge_bot.github.actions import Actions
from kforge_bot.text import clip, fmt_time, markdown_cell, markdown_text, workflow_command

# ------------------------------------------------------------------------- rendering (pure functions)


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


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


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
            out.append(f"::error file={path},title={_escape_property(title)}::{_escape_data(message)}")
        if k.unmeasured_required:
            # An error only when it fails the run; otherwise a warning, so that nobody mistakes a
            # pass on this runner for a measurement on the required one.
            level = "error" if report.require_all_targets else "warning"
            title = f"kforge gate: {k.name} not measured on {', '.join(k.unmeasured_required)}"
            message = f"{k.name}: {_required_note(k, report.require_all_targets)}"
            out.append(f"::{level} file={path},title={_escape_property(title)}::{_escape_data(message)}")
    return out


def status_for(report: GateReport) -> tuple[str, str]:
    """(state, description) for the commit status."""
    counts = report.counts()
    state = "failure" if report.exit_code else "success"
    parts = [f"{counts[v]} {v}" for v in VERDICTS if counts[v]]
    text = ", ".join(parts) if parts else "no changed kernel"
    missing = report.unmeasured_required()
    if missing:
        text += "; not measured: " + ", ".join(missing)
    return state, f"kforge gate: {text}"[:140]  # GitHub's limit for a status description


def render_console(report: GateReport) -> None:
    console = output_console()
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


def spec_change_approval(label: str, repo: Path, head: str) -> tuple[bool, str | None]:
    """Whether this Actions run is a maintainer adding the spec-change label to the revision being gated
    (kforge_bot.github.trust.approves_spec_change), and, where the label is on the pull request but approves nothing
    here, a note that says why. Outside a pull-request event nothing is approved."""
    if Actions.read().missing("event_path", "event_name"):
        return False, None
    try:
        event = events.from_env()
    except KforgeError:
        return False, None
    if isinstance(event, events.Ignored):
        return False, None
    if trust.approves_spec_change(event, label, gitops.resolve(repo, head)):
        return True, None
    if label in event.labels:
        return False, (f"the '{label}' label approves only the revision it was added to: this run is "
                       f"'{event.action or event.event_name}', not a maintainer adding it to {head}; to approve this "
                       "revision's changes to a kernel's test, remove the label and add it again")
    return False, None


def _post_status(report: GateReport, target: str) -> None:
    actions = Actions.read()
    if not actions.can_post:
        click.echo("commit status: skipped (GITHUB_TOKEN and GITHUB_REPOSITORY are not both set)", err=True)
        return

    state, description = status_for(report)
    url = actions.run_url
    context = "kforge-bot/gate" + (f" ({target})" if target != "auto" else "")
    try:
        GitHub.from_env().set_status(report.head_sha, state, description, context=context, target_url=url)
    except KforgeError as exc:
        # The verdict stands either way; a missing `statuses: write` must not hide it.
        if actions.running:
            workflow_command(f"::warning title=kforge gate::{_escape_data(f'commit status not set: {exc}')}", err=True)
        else:
            click.echo(f"warning: commit status not set: {exc}", err=True)
        return
    click.echo(f"commit status: {state} on {report.head_sha[:12]} ({context}: {description})", err=True)


@click.command("gate", epilog=examples(
    "kforge-bot gate --base origin/main --head HEAD      # the kernels a change touches, base against head",
    "kforge-bot gate --base v1.2 --head HEAD --all      # every managed kernel",
    "kforge-bot gate --base origin/main --head HEAD --json gate.json   # the verdicts, machine-readable"))
@click.option("--base", "base", required=True, help="Base revision (the PR's target branch or its sha).")
@click.option("--head", "head", default="HEAD", show_default=True, help="Head revision (the PR's head).")
@click.option("--all", "all_kernels", is_flag=True, help="Measure every managed kernel, changed or not (nightly).")
@click.option("--target", default="auto", show_default=True,
              help="auto, a device kind (cpu, cuda, xpu, mps) or a runner class (h200, b200, arc-b580, ...).")
@click.option("--policy", "policy_path", default=None,
              help="Policy file (or a shipped one: default, strict), read as the base revision has it when it is in "
                   "the repository. Default: the shipped default policy.")
@json_option("The full report.")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="Result cache directory (default: $KFORGE_CACHE_DIR, else ~/.cache/kforge-bot, which fits "
                   "actions/cache); one inside the checkout is not used.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@timing_budget_option("Seconds of interleaved timing in each kernel's evaluation (default: the policy's "
                      "evaluation.timing_budget_s).", maximum=3600)
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="A directory inside the git repository.")
@click.option("--require-all-targets", is_flag=True, default=None,
              help="Fail when a policy-required target cannot be measured on this runner (default: the policy's "
                   "gate.require_all_targets; otherwise it is reported as skipped).")
def gate(base: str, head: str, all_kernels: bool, target: str, policy_path: str | None, json_path: str | None,
         cache_dir: Path | None, no_cache: bool, timing_budget: float | None, repo: Path,
         require_all_targets: bool | None) -> int:
    """Measure the kernels a change touches, base against head on this device, and fail on a
    regression, an incorrect kernel or one that no longer builds."""
    root = repo_root(repo)
    # The base's rules: a policy file in the repository is read as the base revision has it.
    policy = load_policy_from_base(root, gitops.resolve(root, base), policy_path)
    quiet = json_path is not None and str(json_path) == "-"
    progress = output_console(stderr=True)
    announced: list[str] = []

    def announce() -> None:
        announced.append(announcement(policy.isolation_mode("gate")))
        click.echo(announced[0], err=True)

    def log(message: str) -> None:
        if not quiet:
            progress.print(f"[dim]kforge gate:[/dim] {escape(message)}")  # the message may quote what a change wrote

    approved, stale_label = spec_change_approval(policy.trust.spec_change_label, repo, head)
    report = run_gate(repo, base, head, policy=policy, all_kernels=all_kernels, target=target,
                      cache_dir=cache_dir, use_cache=not no_cache, timing_budget_s=timing_budget, log=log,
                      require_all_targets=True if require_all_targets else None, before_first_run=announce,
                      spec_change_approved=approved)
    if stale_label and any(k.verdict == "spec-changed" for k in report.kernels):
        report.notes.append(stale_label)
    data = report.to_dict()
    if quiet:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        render_console(report)
        write_json(data, json_path)
    actions = Actions.read()
    summary = actions.step_summary
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write("".join(f"{line}\n\n" for line in announced) + render_markdown(report) + "\n")
    if actions.running:
        for line in annotation_lines(report, actions.workspace or None):
            workflow_command(line, err=quiet)  # stdout, unless stdout carries the JSON report
    _post_status(report, target)
    return report.exit_code
