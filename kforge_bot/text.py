"""Text helpers shared by the reports, the loop and the commands."""

from __future__ import annotations


def one_line(text: object, limit: int) -> str:
    """`text` on one line (whitespace runs become one space), cut to `limit` characters with '...'."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def one_line_tail(text: object, limit: int) -> str:
    """`text` on one line, keeping its last `limit` characters after '...' (where a failing tool's output says
    what went wrong)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else "..." + flat[-limit:]


def markdown_cell(text: object) -> str:
    """`text` as one cell of a Markdown table: backslashes and pipes escaped, on one line."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the last of them '…' when cut (GitHub's limits on titles and statuses)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
