"""The parent's half of shipped inputs (Plan.ship_inputs, evaluate.worker.shipped_inputs): each file a head's worker
asks for, copied from the reference's recorded folder (out of every worker's view) into that worker's scratch, one
at a time, when its harness asks. A copy, never a link: the head's process may write its scratch, and the recorded
files serve every later head of the same reference."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kforge_bot.evaluate.wire.shipped import valid_name


class Stager:
    """Answers a head worker's `need_inputs` messages (evaluate.pair_driver.RemoteSide) from `recorded`."""

    def __init__(self, recorded: Path, scratch: Path) -> None:
        self.recorded, self.scratch = recorded, scratch
        self.staged = 0  # files handed over (the evaluation's phases report it)

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """The control line that answers one request: {"op": "staged", "file": name, "ok": whether it is there}."""
        name = message.get("file")
        ok = False
        if valid_name(name):
            source = self.recorded / str(name)
            if source.is_file():
                shutil.copyfile(source, self.scratch / f"shipped-{name}")
                self.staged += 1
                ok = True
        return {"op": "staged", "file": name if isinstance(name, str) else "", "ok": ok}
