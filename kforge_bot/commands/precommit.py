"""`kforge-bot precommit`: not yet available (see the project's issues)."""

import click

from kforge_bot.errors import KforgeError


@click.command("precommit", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def precommit(args: tuple[str, ...]) -> None:
    """Not yet available."""
    raise KforgeError("'kforge-bot precommit' is not yet available in this version")
