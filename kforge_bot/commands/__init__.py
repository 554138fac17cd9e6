"""The subcommands of `kforge-bot`, one module each (kforge_bot.cli loads them lazily)."""

from __future__ import annotations


def examples(*lines: str) -> str:
    """A click epilog with usage examples, kept as written (click rewraps paragraphs not marked with \\b)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def output_console(stderr: bool = False):  # -> rich.console.Console
    """The console a command prints its result on. Into a log or a pipe, lines stay whole (a wrapped command
    could not be pasted back, a wrapped figure not grepped); on a terminal, rich wraps to its width."""
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, soft_wrap=not stream.isatty())
