"""`kforge-bot track [--rev REV]`: measure every managed kernel at a commit on this runner and append the results to
the repository's performance history (refs/kforge/history; kforge_bot/history/store.py)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from kforge_bot import gitops
from kforge_bot.commands import examples, json_option, output_console, target_option, timing_budget_option, write_json
from kforge_bot.config.policy import load_policy_from_base
from kforge_bot.gate.run import repo_root
from kforge_bot.history.runner import Runner, probe_runner
from kforge_bot.history.store import HISTORY_REF, Store
from kforge_bot.history.track import append_record, track_commit
from kforge_bot.targets import choose_target


def commits_in(root: Path, revs: tuple[str, ...], span: str | None) -> list[str]:
    """The commits to track: each --rev, then --range's first-parent commits oldest first."""
    shas = [gitops.resolve(root, r) for r in revs]
    if span:
        listed = gitops.run_git(root, "rev-list", "--first-parent", "--reverse", span, "--",
                                what=f"cannot list the commits of {span!r}", hint="give A..B of two revisions")
        shas += [line for line in listed.split() if line]
    return shas or [gitops.resolve(root, "HEAD")]


def default_remote(root: Path, remote: str | None) -> str | None:
    """--remote, else origin where the clone has one, else None (the history stays in this clone)."""
    if remote is not None:
        return remote or None
    remotes = gitops.run_git(root, "remote", what="cannot list remotes").split()
    return "origin" if "origin" in remotes else None


@click.command("track", epilog=examples(
    "kforge-bot track                          # HEAD, every managed kernel, appended to refs/kforge/history",
    "kforge-bot track --rev v1.2 --rev v1.3    # two commits",
    "kforge-bot track --range v1.2..main       # every first-parent commit after v1.2 up to main (a backfill)"))
@click.option("--rev", "revs", multiple=True, help="A commit to measure (repeatable; default HEAD).")
@click.option("--range", "span", default=None, help="A..B: every first-parent commit after A up to B, oldest first.")
@click.option("--kernel", "kernels", multiple=True, help="Only this kernel (id or name; repeatable).")
@target_option("Where to measure: auto, a device kind or a runner class.")
@click.option("--policy", "policy_path", default=None,
              help="Policy file (or a shipped one), read as HEAD has it. Default: the shipped default policy.")
@timing_budget_option("Seconds of interleaved timing in each kernel's evaluation (default: the policy's).",
                      maximum=3600)
@click.option("--remote", default=None,
              help=f"Where {HISTORY_REF} is shared (default: origin if the clone has one; '' for this clone only).")
@json_option("The records appended.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="A directory inside the git repository.")
def track(revs: tuple[str, ...], span: str | None, kernels: tuple[str, ...], target: str, policy_path: str | None,
          timing_budget: float | None, remote: str | None, json_path: str | None, repo: Path) -> int:
    """Measure every managed kernel (each shape set, each direction) at a commit on this runner, and append the
    results, with this runner's facts, to the history kept on refs/kforge/history."""
    root = repo_root(repo)
    policy = load_policy_from_base(root, gitops.resolve(root, "HEAD"), policy_path)
    choice = choose_target(target)
    store = Store(root, default_remote(root, remote))
    console = output_console(stderr=True)
    quiet = json_path is not None and str(json_path) == "-"
    runners: dict[str, Runner] = {}
    appended = []
    failed = 0
    for sha in commits_in(root, revs, span):
        record = track_commit(root, sha, _runner(runners, choice.device_kind()), policy, target=choice,
                              kernels=kernels, timing_budget_s=timing_budget,
                              log=None if quiet else lambda m: console.print(f"[dim]kforge track:[/dim] {escape(m)}"))
        for kind, part in _by_target(record).items():
            runner = _runner(runners, kind)
            part["runner"] = runner.to_dict()
            store.update(lambda files, r=runner, p=part: append_record(files, r, p),
                         f"track {sha[:12]} on {runner.key}")
            appended.append(part)
        failed += sum(1 for k in record["kernels"] if k["status"] not in ("measured", "skipped"))
        if not quiet:
            for k in record["kernels"]:
                sets = ", ".join(f"{s['label']} {s['time_ms']:.4g} ms" for s in k.get("shape_sets") or [])
                click.echo(f"{sha[:10]} {k['name']}: {k['status']}" + (f" ({sets})" if sets else
                                                                        f": {k.get('reason', '')}"))
    if not quiet:
        click.echo(f"appended {len(appended)} record(s) to {HISTORY_REF}" + (f" on {store.remote}" if store.remote
                                                                                 else " (this clone)"))
    write_json({"ref": HISTORY_REF, "records": appended}, json_path)
    return 1 if failed else 0


def _runner(known: dict[str, Runner], kind: str) -> Runner:
    if kind not in known:
        known[kind] = probe_runner(kind)
    return known[kind]


def _by_target(record: dict) -> dict[str, dict]:
    """One record per device kind the kernels were measured on (a kernel not measured goes with the first)."""
    kinds = sorted({k["target"] for k in record["kernels"] if k.get("target")}) or [record["runner"]["kind"]]
    parts = {kind: {**record, "kernels": []} for kind in kinds}
    for k in record["kernels"]:
        parts[k.get("target") or kinds[0]]["kernels"].append(k)
    return parts
