"""The one error type users see.

Anything a user can fix (a malformed kernel file, manifest, policy, event payload or a bad flag)
raises `KforgeError` with a single line that names the file and the fix. The CLI prints it and
exits with status 2; it never prints a traceback for it.
"""

from __future__ import annotations

from pathlib import Path


class KforgeError(Exception):
    """A user-facing failure: one line, naming the file and what to do."""

    def __init__(self, message: str, *, path: str | Path | None = None, hint: str | None = None):
        self.path = str(path) if path is not None else None
        self.hint = hint
        text = f"{self.path}: {message}" if self.path else message
        if hint:
            text = f"{text} ({hint})"
        super().__init__(text.replace("\n", " "))
