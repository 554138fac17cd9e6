"""`kforge-bot recheck`: kernels the bot once judged correct, judged again by today's harness.

A harness that learns to catch more (held-out shapes and values, kforge_bot.evaluate.wire.heldout) may fail a kernel it
passed before. This re-runs the correctness checks (never timing) over what the bot accepted: each optimize run's
accepted candidates (its report folder: trajectory.jsonl and candidates/), and the bot's follow-up branches
(`kforge/pr-<N>/<kernel>` in a repository, the kernel file at each branch's tip judged under the repository's
own spec as checked out). Every kernel that no longer passes is reported, with the harness that passed it (each
verdict records its version: details.harness_version) and today's. Exit 1 when any no longer passes.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from kforge_bot.commands import examples, json_option, target_option, write_json
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import MANIFEST_NAME, KernelSpec, discover_kernels, load_spec

BEFORE_VERSIONS = "before versions were recorded"


@dataclass
class Item:
    """One kernel to judge again: where it came from, its spec, its file, and the harness that passed it."""

    origin: str
    spec: KernelSpec
    candidate: Path
    passed_by: str


def spec_of_run(start: dict[str, Any], report: Path) -> KernelSpec:
    """The spec an optimize run worked on, from its start event (the kernel's folder, format and name)."""
    root, fmt, name = Path(str(start.get("root") or "")), start.get("format"), str(start.get("kernel") or "")
    if fmt == "kernelbench":
        return load_spec(root / str(start.get("kernel_file") or ""))
    if fmt == "gpumode":
        return load_spec(root)
    if fmt == "manifest":
        return load_spec(root / MANIFEST_NAME, name)
    raise KforgeError(f"the run's start event names no known format ({fmt!r})", path=report / "trajectory.jsonl",
                      hint="recheck reads report folders written by `kforge-bot optimize --report`")


def accepted_in_report(report: Path) -> list[Item]:
    """Each candidate an optimize run accepted, with the harness version its result recorded."""
    from kforge_bot.optimize.trajectory import TRAJECTORY_FILE, read_events

    events = read_events(report / TRAJECTORY_FILE)
    if not events or events[0].get("event") != "start":
        raise KforgeError("the trajectory does not begin with a start event", path=report / TRAJECTORY_FILE)
    spec = spec_of_run(events[0], report)
    files = {e.get("iteration"): e.get("file") for e in events if e.get("event") == "candidate"}
    items = []
    for event in events:
        if event.get("event") != "result" or not event.get("accepted"):
            continue
        iteration, file = event.get("iteration"), files.get(event.get("iteration"))
        if not file:
            continue
        details = (event.get("result") or {}).get("details") or {}
        items.append(Item(origin=f"{report.name}: iteration {iteration} ({file})", spec=spec,
                          candidate=report / str(file), passed_by=str(details.get("harness_version") or
                                                                      BEFORE_VERSIONS)))
    return items


def follow_up_branches(repo: Path, scratch: Path) -> list[Item]:
    """The bot's follow-up branches in `repo` (local, and the remote's as fetched), each kernel file at its tip."""
    from kforge_bot import gitops

    out = gitops.open_repo(repo).git.for_each_ref("--format=%(refname:short)", "refs/heads/" + gitops.BRANCH_PREFIX,
                                                  "refs/remotes/origin/" + gitops.BRANCH_PREFIX)
    specs = {s.name: s for s in discover_kernels(repo)}
    top = gitops.toplevel(repo) or repo
    items = []
    for ref in dict.fromkeys(line.strip() for line in out.splitlines() if line.strip()):
        parsed = gitops.parse_bot_branch(ref.removeprefix("origin/"))
        spec = specs.get(parsed[1]) if parsed else None
        if spec is None:
            continue
        rel = (Path(spec.root) / spec.kernel_file).resolve().relative_to(Path(top).resolve())
        source = gitops.read_file_at(top, ref, rel.as_posix())
        if source is None:
            continue
        path = scratch / ref.replace("/", "_") / Path(spec.kernel_file).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        items.append(Item(origin=f"{ref} (follow-up of PR #{parsed[0]})", spec=spec,  # type: ignore[index]
                          candidate=path, passed_by=BEFORE_VERSIONS))
    return items


def recheck_item(item: Item, target: str, isolation: str) -> dict[str, Any]:
    """Today's correctness verdict on one kernel: the row recheck reports."""
    from kforge_bot.evaluate.api import evaluate
    from kforge_bot.evaluate.judge import harness_version
    from kforge_bot.evaluate.wire.result import EvalSettings
    from kforge_bot.kernelspec.comparison import resolve_candidate

    candidate, baseline, _ = resolve_candidate(item.spec, item.candidate)
    settings = EvalSettings(measure=False, profile=False, isolation=isolation)
    result = evaluate(item.spec, candidate, target, settings, baseline=baseline)
    return {"origin": item.origin, "kernel": item.spec.name, "passed_by": item.passed_by,
            "today": harness_version(), "verdict": result.verdict, "still_passes": result.correct,
            "reason": result.reason}


@click.command("recheck", epilog=examples(
    "kforge-bot recheck kforge-report/          # optimize's accepted candidates, judged again",
    "kforge-bot recheck --repo .                # the bot's follow-up branches (kforge/pr-N/...)"))
@click.argument("reports", nargs=-1, type=click.Path(path_type=Path, file_okay=False))
@click.option("--repo", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="A repository whose kforge/pr-<N>/<kernel> branches are the bot's follow-ups.")
@target_option("Where to run the checks.")
@click.option("--isolation", type=click.Choice(["required", "preferred", "off"]), default="preferred",
              show_default=True, help="The OS sandbox for every worker.")
@json_option("Every kernel's verdict today.")
def recheck(reports: tuple[Path, ...], repo: Path | None, target: str, isolation: str, json_path: str | None) -> int:
    """Judge what the bot accepted again under today's harness; report each kernel that no longer passes."""
    if not reports and repo is None:
        raise KforgeError("nothing to recheck: give optimize report folders and/or --repo",
                          hint="kforge-bot recheck REPORT_DIR... [--repo PATH]")
    with tempfile.TemporaryDirectory(prefix="kforge-recheck-") as scratch:
        items = [i for report in reports for i in accepted_in_report(report)]
        if repo is not None:
            items += follow_up_branches(repo, Path(scratch))
        rows = []
        for item in items:
            row = recheck_item(item, target, isolation)
            rows.append(row)
            if json_path is None or str(json_path) != "-":
                state = "still passes" if row["still_passes"] else \
                    f"NO LONGER PASSES ({row['verdict']}: {row['reason']})"
                click.echo(f"{row['origin']}: {row['kernel']}: {state}; passed by harness {row['passed_by']}, "
                           f"today {row['today']}")
    failed = [r for r in rows if not r["still_passes"]]
    write_json({"rechecked": rows, "no_longer_passing": len(failed)}, json_path)
    if json_path is None or str(json_path) != "-":
        click.echo(f"{len(rows)} kernel(s) rechecked: {len(rows) - len(failed)} still pass, "
                   f"{len(failed)} no longer pass")
    return 1 if failed else 0
