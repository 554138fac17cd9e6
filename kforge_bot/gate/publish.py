"""`kforge-bot gate` as the command runs it: the base's policy, a maintainer's approval of a change to a kernel's
test, the run (kforge_bot.gate.run), and its report where people and GitHub read it: the console or JSON, the job
summary, annotations and the commit status."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from kforge_bot import gitops
from kforge_bot.config.policy import load_policy_from_base
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.isolation import announcement
from kforge_bot.gate.render import annotation_lines, escape_data, render_console, render_markdown, status_for
from kforge_bot.gate.report import GateReport
from kforge_bot.gate.run import repo_root, run_gate
from kforge_bot.github import events, trust
from kforge_bot.github.actions import Actions
from kforge_bot.github.client import GitHub
from kforge_bot.text import workflow_command


@dataclass(frozen=True)
class GateRequest:
    """What `kforge-bot gate` was asked: two revisions, which kernels, where, under which policy."""

    repo: Path
    base: str
    head: str
    all_kernels: bool
    target: str
    policy_path: str | None
    cache_dir: Path | None
    use_cache: bool
    timing_budget_s: float | None
    require_all_targets: bool | None


def run_and_publish(request: GateRequest, *, quiet: bool, console: Console, progress: Console,
                    save_json: Callable[[dict[str, Any]], None]) -> int:
    """Gate `request.head` against `request.base` and publish the report; returns the exit code. `quiet`: the JSON
    report goes to stdout (`save_json` writes it there), so nothing else does."""
    root = repo_root(request.repo)
    # The base's rules: a policy file in the repository is read as the base revision has it.
    policy = load_policy_from_base(root, gitops.resolve(root, request.base), request.policy_path)
    announced: list[str] = []

    def announce() -> None:
        announced.append(announcement(policy.isolation_mode("gate")))
        click.echo(announced[0], err=True)

    def log(message: str) -> None:
        if not quiet:
            progress.print(f"[dim]kforge gate:[/dim] {escape(message)}")  # the message may quote what a change wrote

    approved, stale_label = spec_change_approval(policy.trust.spec_change_label, request.repo, request.head)
    report = run_gate(request.repo, request.base, request.head, policy=policy, all_kernels=request.all_kernels,
                      target=request.target, cache_dir=request.cache_dir, use_cache=request.use_cache,
                      timing_budget_s=request.timing_budget_s, log=log,
                      require_all_targets=True if request.require_all_targets else None, before_first_run=announce,
                      spec_change_approved=approved)
    if stale_label and any(k.verdict == "spec-changed" for k in report.kernels):
        report.notes.append(stale_label)
    if not quiet:
        render_console(report, console)
    save_json(report.to_dict())
    _publish(report, announced, request.target, quiet)
    return report.exit_code


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


def _publish(report: GateReport, announced: list[str], target: str, quiet: bool) -> None:
    """Under Actions: the job summary and the annotations; anywhere with a token: the commit status."""
    actions = Actions.read()
    summary = actions.step_summary
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write("".join(f"{line}\n\n" for line in announced) + render_markdown(report) + "\n")
    if actions.running:
        for line in annotation_lines(report, actions.workspace or None):
            workflow_command(line, err=quiet)  # stdout, unless stdout carries the JSON report
    _post_status(report, target)


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
            workflow_command(f"::warning title=kforge gate::{escape_data(f'commit status not set: {exc}')}", err=True)
        else:
            click.echo(f"warning: commit status not set: {exc}", err=True)
        return
    click.echo(f"commit status: {state} on {report.head_sha[:12]} ({context}: {description})", err=True)
