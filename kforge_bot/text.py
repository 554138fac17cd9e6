"""Text helpers shared by the reports, the loop and the commands."""

from __future__ import annotations

import re
import sys
from typing import Any


def one_line(text: object, limit: int) -> str:
    """`text` on one line (whitespace runs become one space), cut to `limit` characters with '...'."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def one_line_tail(text: object, limit: int) -> str:
    """`text` on one line, keeping its last `limit` characters after '...' (where a failing tool's output says
    what went wrong)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else "..." + flat[-limit:]


def three_figures(value: float) -> str:
    """A figure to about three significant digits: 412, 41.2, 1.31."""
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def fmt_time(ms: float | None) -> str:
    """A time in milliseconds as 412 us, 1.31 ms, 2.50 s; n/a when unknown."""
    if ms is None or ms != ms or ms < 0:
        return "n/a"
    if ms >= 1000:
        return f"{three_figures(ms / 1000)} s"
    if ms >= 1:
        return f"{three_figures(ms)} ms"
    return f"{three_figures(ms * 1000)} us"


def markdown_cell(text: object) -> str:
    """`text` as one cell of a Markdown table: backslashes and pipes escaped, on one line."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def code_span(text: object) -> str:
    """`text` as Markdown inline code, on one line, in a run of backticks longer than any inside it. The one way
    text a pull request, a kernel or a model wrote reaches a PR body, a comment or a job summary: inside a code
    span GitHub renders no link, image, mention, emphasis or HTML."""
    flat = " ".join(str(text).split())
    longest = max((len(m) for m in re.findall(r"`+", flat)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


_PLAIN = re.compile(r"[A-Za-z0-9 .,:;=+\-()%/']*")
# What GitHub links in plain text without any markup: `GH-12` (an issue), a run of 7 to 40 hex digits (a commit),
# and a repository's own autolink prefixes (`TICKET-12`, any letters then a dash and a number).
_AUTOLINKED = re.compile(r"\b[A-Za-z][A-Za-z0-9]*-\d|\b[0-9A-Fa-f]{7,40}\b")


def markdown_text(text: object) -> str:
    """Text someone else wrote, for Markdown: as it is when it can render nothing but itself (letters, digits,
    spaces and .,:;=+-()%/', no URL, nothing GitHub autolinks), else a `code_span`."""
    flat = " ".join(str(text).split())
    if _PLAIN.fullmatch(flat) and "://" not in flat and "www." not in flat.lower() and not _AUTOLINKED.search(flat):
        return flat
    return code_span(flat)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the last of them '…' when cut (GitHub's limits on titles and statuses)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -------------------------------------------------------------------- GitHub Actions workflow commands
# The runner reads a workflow command from any line of a step's output whose first non-blank characters are `::`
# (`::error::`, `::stop-commands::`, `::add-mask::`), and a `##[` command anywhere in a line. Text the bot prints can
# hold what a pull request wrote (a kernel's name, an error quoting a manifest, a kernel's own exception), so under
# Actions every line the bot prints goes through `no_workflow_commands`; its own annotations alone go out as they are
# (`workflow_command`). A zero-width space between the first two characters keeps the text readable.
_BREAK = "\u200b"
_LINE_COMMAND = re.compile(r"(^|[\r\n])([^\S\r\n]*):(?=:)")


def no_workflow_commands(text: str) -> str:
    """`text` with no line that the Actions runner would read as a workflow command."""
    return _LINE_COMMAND.sub(rf"\1\2:{_BREAK}", text.replace("##[", f"#{_BREAK}#["))


class WorkflowCommandGuard:
    """A text stream in front of stdout or stderr under GitHub Actions that lets no workflow command through
    (`no_workflow_commands`, line by line), except those the bot writes with `command`. On a flush, a partial line
    is held while it could still become one (blank or a lone `:` so far, or ending in `#`)."""

    def __init__(self, stream: Any):
        self.stream = stream
        self._pending = ""  # the current line's text not written yet
        self._open = False  # part of the current line is written, its start checked

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        lines = re.split(r"(?<=[\r\n])", self._pending + text)
        self._pending = lines.pop()
        for line in lines:
            self.stream.write(self._safe(line))
            self._open = False
        return len(text)

    def _safe(self, part: str) -> str:
        return part.replace("##[", f"#{_BREAK}#[") if self._open else no_workflow_commands(part)

    def flush(self) -> None:
        body = self._pending.rstrip("#")
        # lstrip() with no argument: the runner trims every Unicode blank before it looks for `::`.
        if body and (self._open or body.lstrip() not in ("", ":")):
            self.stream.write(self._safe(body))
            self._open, self._pending = True, self._pending[len(body):]
        self.stream.flush()

    def finish(self) -> None:
        """Write what is held (the command is ending)."""
        if self._pending:
            self.stream.write(self._safe(self._pending))
        self._pending, self._open = "", False
        self.stream.flush()

    def command(self, line: str) -> None:
        """One workflow command of the bot's own, on a line of its own."""
        if self._pending or self._open:
            self.stream.write(self._safe(self._pending) + "\n")
            self._pending, self._open = "", False
        self.stream.write(own_command(line) + "\n")
        self.stream.flush()

    @property
    def buffer(self) -> Any:
        raise AttributeError("the guarded stream takes text only")  # no way around the guard through bytes

    def __getattr__(self, name: str) -> Any:  # encoding, errors, isatty, fileno...
        return getattr(self.stream, name)


def own_command(line: str) -> str:
    """One of the bot's own workflow commands, on one line, carrying no second (`##[`) command in its message."""
    return line.replace("\r", "").replace("\n", "").replace("##[", f"#{_BREAK}#[")


def workflow_command(line: str, err: bool = False) -> None:
    """Print one of the bot's own workflow commands (an annotation) past the guard, on stdout or stderr."""
    stream = sys.stderr if err else sys.stdout
    if isinstance(stream, WorkflowCommandGuard):
        stream.command(line)
    else:
        print(own_command(line), file=stream, flush=True)
