"""`kforge-bot history` (the series, change points and acknowledgements; --json, --html) and `kforge-bot ack`
(accept a change point, with a reason)."""

from __future__ import annotations

import getpass
from pathlib import Path

import click

from kforge_bot import gitops
from kforge_bot.commands import examples, json_option, output_console, write_json
from kforge_bot.commands.track import default_remote
from kforge_bot.gate.run import repo_root
from kforge_bot.history.acks import ack_path, make_ack, parse_id
from kforge_bot.history.report import load_report, text_lines
from kforge_bot.history.store import HISTORY_REF, Store

REMOTE_HELP = f"Where {HISTORY_REF} is shared (default: origin if the clone has one; '' for this clone only)."


@click.command("history", epilog=examples(
    "kforge-bot history                       # every series and its change points",
    "kforge-bot history --kernel softmax --json history.json",
    "kforge-bot history --html site/          # the static dashboard (GitHub Pages)"))
@click.option("--kernel", "kernels", multiple=True, help="Only this kernel (id or name; repeatable).")
@click.option("--rev", default="HEAD", show_default=True, help="The main line's tip: series follow its first parents.")
@json_option("The series, change points and acknowledgements.")
@click.option("--html", "html_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write the static dashboard (one page per kernel) into this folder.")
@click.option("--remote", default=None, help=REMOTE_HELP)
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="A directory inside the git repository.")
def history(kernels: tuple[str, ...], rev: str, json_path: str | None, html_dir: Path | None, remote: str | None,
            repo: Path) -> None:
    """Show the performance history kept on refs/kforge/history: each kernel's series per shape set over the main
    line's commits, the change points found in them (past the policy's threshold), and their acknowledgements."""
    root = repo_root(repo)
    report = load_report(root, Store(root, default_remote(root, remote)), rev, kernels)
    if json_path != "-":
        console = output_console()
        for line in text_lines(report):
            console.print(line, markup=False, soft_wrap=True)
    write_json(report.to_dict(), json_path)
    if html_dir is not None:
        from kforge_bot.history.dashboard import write_site

        index = write_site(report, html_dir)
        click.echo(f"dashboard: {index}", err=True)


@click.command("ack", epilog=examples(
    "kforge-bot ack softmax@1a2b3c4d5e6f --reason 'the fp32 accumulation the accuracy fix needs'"))
@click.argument("change_id")
@click.option("--reason", required=True, help="Why the new level is accepted (kept in the history).")
@click.option("--by", default=None, help="Who accepts it (default: git's user.name, else the login).")
@click.option("--remote", default=None, help=REMOTE_HELP)
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="A directory inside the git repository.")
def ack(change_id: str, reason: str, by: str | None, remote: str | None, repo: Path) -> None:
    """Acknowledge the change point CHANGE_ID (KERNEL@COMMIT, as `kforge-bot history` lists it): its level becomes
    the new normal and it alerts no more."""
    root = repo_root(repo)
    kernel, prefix = parse_id(change_id)
    commit = gitops.resolve(root, prefix)
    record = make_ack(kernel, commit, by or _who(root), reason, via="cli")
    Store(root, default_remote(root, remote)).update(lambda _files: {ack_path(record["id"]): record},
                                                     f"ack {record['id']}")
    click.echo(f"acknowledged {record['id']} ({record['by']}): {record['reason']}")


def _who(root: Path) -> str:
    try:
        name = gitops.run_git(root, "config", "user.name", what="no user.name").strip()
    except Exception:  # noqa: BLE001 - any failure: fall back to the login
        name = ""
    return name or getpass.getuser()
