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
from kforge_bot.github.actions import Actions
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
@click.option("--alert", is_flag=True,
              help="Re-measure each open regression (the commits on each side, interleaved), bisect it to the commit, "
                   "and open or comment on the kernel's GitHub issue (with GITHUB_TOKEN and GITHUB_REPOSITORY set).")
@click.option("--policy", "policy_path", default=None,
              help="Policy file (or a shipped one) for --alert's measurements, read as --rev has it.")
@click.option("--remote", default=None, help=REMOTE_HELP)
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="A directory inside the git repository.")
def history(kernels: tuple[str, ...], rev: str, json_path: str | None, html_dir: Path | None, alert: bool,
            policy_path: str | None, remote: str | None, repo: Path) -> int:
    """Show the performance history kept on refs/kforge/history: each kernel's series per shape set over the main
    line's commits, the change points found in them (past the policy's threshold), and their acknowledgements."""
    root = repo_root(repo)
    report = load_report(root, Store(root, default_remote(root, remote)), rev, kernels)
    console = output_console()
    if json_path != "-":
        for line in text_lines(report):
            console.print(line, markup=False, soft_wrap=True)
    data = report.to_dict()
    confirmed = []
    if alert:
        confirmed = _alert(root, report, policy_path, rev, quiet=json_path == "-")
        data["alerts"] = [a.to_dict() for a in confirmed]
    write_json(data, json_path)
    if html_dir is not None:
        from kforge_bot.history.dashboard import write_site

        index = write_site(report, html_dir)
        click.echo(f"dashboard: {index}", err=True)
    return 1 if any(a.confirmed for a in confirmed) else 0


def _alert(root: Path, report, policy_path: str | None, rev: str, quiet: bool) -> list:  # noqa: ANN001
    """Confirm the open regressions by re-measuring, bisect them, and file them (kforge_bot/history/alerts.py)."""
    from kforge_bot.github.client import GitHub
    from kforge_bot.config.policy import load_policy_from_base
    from kforge_bot.history.alerts import confirm, file_issue

    policy = load_policy_from_base(root, gitops.resolve(root, rev), policy_path)
    alerts = confirm(root, report, policy)
    actions = Actions.read()
    gh = GitHub.from_env() if actions.can_post and any(a.confirmed for a in alerts) else None
    run_url = actions.run_url
    for a in alerts:
        where = ""
        if a.confirmed and gh is not None:
            ref = file_issue(gh, a, run_url)
            where = f"; issue {ref.action}: {ref.url}"
        elif a.confirmed:
            where = "; no issue filed (GITHUB_TOKEN and GITHUB_REPOSITORY are not both set)"
        if not quiet:
            word = "confirmed" if a.confirmed else f"not confirmed ({a.result.status})"
            click.echo(f"change point {a.change.id}: {word}; first bad commit {a.result.first_bad or '-'}, "
                       f"{a.result.change}{where}", err=True)
    return alerts


@click.command("ack", epilog=examples(
    "kforge-bot ack softmax@1a2b3c4d5e6f --reason 'the fp32 accumulation the accuracy fix needs'",
    "kforge-bot ack --from-event      # in the Action, on an issue_comment: `/kforge ack KERNEL@COMMIT reason`"))
@click.argument("change_id", required=False)
@click.option("--reason", default=None, help="Why the new level is accepted (kept in the history).")
@click.option("--by", default=None, help="Who accepts it (default: git's user.name, else the login).")
@click.option("--from-event", is_flag=True,
              help="Take `/kforge ack KERNEL@COMMIT reason` from the issue_comment event (GITHUB_EVENT_PATH); only "
                   "a commenter the policy trusts, with write access, is obeyed.")
@click.option("--policy", "policy_path", default=None, help="Policy file (its trust rules), read as HEAD has it.")
@click.option("--remote", default=None, help=REMOTE_HELP)
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="A directory inside the git repository.")
def ack(change_id: str | None, reason: str | None, by: str | None, from_event: bool, policy_path: str | None,
        remote: str | None, repo: Path) -> None:
    """Acknowledge the change point CHANGE_ID (KERNEL@COMMIT, as `kforge-bot history` lists it): its level becomes
    the new normal and it alerts no more."""
    root = repo_root(repo)
    store = Store(root, default_remote(root, remote))
    if from_event:
        _ack_from_event(root, store, policy_path)
        return
    if not change_id or not reason:
        raise click.UsageError("give CHANGE_ID and --reason (or --from-event)")
    kernel, prefix = parse_id(change_id)
    record = make_ack(kernel, gitops.resolve(root, prefix), by or _who(root), reason, via="cli")
    store.update(lambda _files: {ack_path(record["id"]): record}, f"ack {record['id']}")
    click.echo(f"acknowledged {record['id']} ({record['by']}): {record['reason']}")


def _ack_from_event(root: Path, store: Store, policy_path: str | None) -> None:
    from kforge_bot.github.events import event_payload
    from kforge_bot.github.client import GitHub
    from kforge_bot.config.policy import load_policy_from_base
    from kforge_bot.errors import KforgeError
    from kforge_bot.history.ack_comment import parse_ack_comment, refusal
    from kforge_bot.text import code_span, markdown_text

    actions = Actions.read()
    path, name = actions.event_path, actions.event_name
    if not path or not name:
        raise KforgeError("--from-event needs GITHUB_EVENT_PATH and GITHUB_EVENT_NAME", hint="run it in the Action")
    payload = event_payload(path)
    request = parse_ack_comment(name, payload)
    if isinstance(request, str):
        click.echo(f"kforge ack: nothing to do: {request}")
        return
    policy = load_policy_from_base(root, gitops.resolve(root, "HEAD"), policy_path)
    gh = GitHub.from_env()
    refused = refusal(request, gh.permission(request.sender), policy.trust.allowed_associations)
    if refused:
        click.echo(f"kforge ack: {refused}")
        return
    kernel, prefix = parse_id(request.change_id)
    record = make_ack(kernel, gitops.resolve(root, prefix), request.sender, request.reason,
                      via=f"comment on #{request.number}" + (f" ({request.url})" if request.url else ""))
    store.update(lambda _files: {ack_path(record["id"]): record}, f"ack {record['id']}")
    gh.upsert_comment(request.number, f"kforge-bot: change point {code_span(record['id'])} acknowledged by "
                                      f"{markdown_text(request.sender)}: {markdown_text(record['reason'])}. "
                                      "Its level is the new normal.", f"<!-- kforge-ack {record['id']} -->")
    click.echo(f"acknowledged {record['id']} ({record['by']}): {record['reason']}")


def _who(root: Path) -> str:
    try:
        name = gitops.run_git(root, "config", "user.name", what="no user.name").strip()
    except Exception:  # noqa: BLE001 - any failure: fall back to the login
        name = ""
    return name or getpass.getuser()
