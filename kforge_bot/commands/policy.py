"""`kforge-bot policy`: validate (`check`), print (`show`) and describe (`schema`) policy files."""

from __future__ import annotations

import json

import click
import yaml

from kforge_bot.commands import examples, json_option, write_json
from kforge_bot.config.policy import load_policy
from kforge_bot.config.schema import json_schema
from kforge_bot.errors import KforgeError


@click.group("policy", epilog=examples(
    "kforge-bot policy check .kforge/policy.yml",
    "kforge-bot policy show --json",
    "kforge-bot policy schema > policies/schema.json"))
def policy() -> None:
    """Validate and show policy files (policies/README.md explains every key)."""


@policy.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def check(files: tuple[str, ...]) -> int:
    """Validate policy FILES; exit 0 when all are valid, 2 with one line per invalid file."""
    failed = 0
    for f in files:
        try:
            load_policy(f)
        except KforgeError as exc:
            failed += 1
            click.echo(f"kforge-bot: error: {exc}", err=True)
        else:
            click.echo(f"{f}: valid policy")
    return 2 if failed else 0


@policy.command("show")
@click.argument("file", required=False)
@json_option("The effective policy (instead of YAML on stdout).")
def show(file: str | None, json_path: str | None) -> None:
    """Print the effective policy of FILE (or the shipped default), defaults filled in.

    FILE may also name a shipped policy: `default` or `strict`."""
    pol = load_policy(file)
    data = pol.to_dict()
    if json_path is not None:
        write_json(data, json_path)
    else:
        click.echo(f"# effective policy from {pol.source}")
        click.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100).rstrip())


@policy.command("schema")
def schema() -> None:
    """Print the JSON Schema of policy files (the same as policies/schema.json)."""
    click.echo(json.dumps(json_schema(), indent=2))
