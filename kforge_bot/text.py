"""Text helpers shared by the reports, the loop and the commands."""

from __future__ import annotations


def one_line(text: object, limit: int) -> str:
    """`text` on one line (whitespace runs become one space), cut to `limit` characters with '...'."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
