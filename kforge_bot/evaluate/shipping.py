"""The parent's half of shipped inputs (Plan.ship_inputs, evaluate.worker.shipped_inputs): each file a head's worker
asks for, handed from the reference's recorded folder (out of every worker's view) into that worker's inbox, one at
a time, when its harness asks.

The inbox is the folder of the worker's scratch its sandbox shows read-only (isolation.inbox_folder): the head's
code can neither write a handed-over file nor put anything in its place, so the file is a hard link to the recorded
one (no copy, no digest: on an H100 copying and hashing each input set made a gate decision 4x slower) and what the
harness reads is what the reference wrote. Before each file the last one goes: no input set lies there before the
call that uses it. Unsandboxed (`isolation: off`) the inbox is as writable as the rest, and whatever is in it is
removed, never followed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from kforge_bot.evaluate.isolation import inbox_folder
from kforge_bot.evaluate.wire.shipped import valid_name, why_name


class Stager:
    """Answers a head worker's `need_inputs` messages (evaluate.pair_driver.RemoteSide) from `recorded`."""

    def __init__(self, recorded: Path, scratch: Path) -> None:
        self.recorded, self.inbox = recorded, inbox_folder(scratch)

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """The control line that answers one request: {"op": "staged", "file", "ok"}; where not handed over,
        "unshippable" (the base's value cannot travel as data) or "refused" (the inbox would not take it), each a
        reason in words."""
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
            self.inbox.mkdir(exist_ok=True)
            _empty(self.inbox)
            _hand_over(source, self.inbox / str(name))
        except OSError as exc:  # a full disk, or (unsandboxed) something of the head's in the way
            reply["refused"] = f"{type(exc).__name__}: {exc.strerror or exc}"[:300]
            return reply
        reply["ok"] = True
        return reply


def _empty(folder: Path) -> None:
    """Everything in `folder` removed, nothing followed (a link goes, not what it points at)."""
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _hand_over(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:  # another filesystem: a copy
        shutil.copyfile(source, dest, follow_symlinks=False)
