"""The subcommands of `kforge-bot`, one module each (kforge_bot.cli loads them lazily)."""

from __future__ import annotations


def examples(*lines: str) -> str:
    """A click epilog with usage examples, kept as written (click rewraps paragraphs not marked with \\b)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
