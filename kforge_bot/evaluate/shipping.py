"""The parent's half of shipped inputs (Plan.ship_inputs, evaluate.worker.shipped_inputs): each file a head's worker
asks for, copied from the reference's recorded folder (out of every worker's view) into that worker's scratch, one
at a time, when its harness asks.

The head's code can write its scratch, so nothing there is followed: whatever sits under the file's name (a link
to a file of the bot's user, a folder) is removed, not written through, and the copy is created anew (O_EXCL,
O_NOFOLLOW). The reply carries the file's SHA-256, which the head's harness checks on what it reads: a file swapped
after the copy is refused there. A copy, never a link: the recorded files serve every later head of the reference.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

from kforge_bot.evaluate.wire.shipped import valid_name, why_name

_CHUNK = 1 << 20


class Stager:
    """Answers a head worker's `need_inputs` messages (evaluate.pair_driver.RemoteSide) from `recorded`."""

    def __init__(self, recorded: Path, scratch: Path) -> None:
        self.recorded, self.scratch = recorded, scratch
        self.staged = 0  # files handed over

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """The control line that answers one request: {"op": "staged", "file", "ok"} and, where handed over, its
        "sha256"; where not, "unshippable" (the base's value cannot travel as data) or "refused" (the head's
        scratch would not take it), each a reason in words."""
        name = message.get("file")
        reply: dict[str, Any] = {"op": "staged", "file": name if isinstance(name, str) else "", "ok": False}
        if not valid_name(name):
            return reply
        source = self.recorded / str(name)
        if not source.is_file():
            why = self.recorded / why_name(str(name))
            if why.is_file():
                reply["unshippable"] = why.read_text(errors="replace")[:300]
            return reply
        try:
            reply["sha256"] = _copy_fresh(source, self.scratch / f"shipped-{name}")
        except OSError as exc:  # the head's scratch holds something it cannot remove, or is full
            reply["refused"] = f"{type(exc).__name__}: {exc.strerror or exc}"[:300]
            return reply
        self.staged += 1
        reply["ok"] = True
        return reply


def _copy_fresh(source: Path, dest: Path) -> str:
    """Copy `source` to a new file at `dest`, removing whatever is there without following it; its SHA-256."""
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)
    digest = hashlib.sha256()
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()
