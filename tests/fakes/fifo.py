"""A FIFO with no writer where the bot reads a file that sandboxed code could replace: the read must come back
at once (refused or empty), never wait for a writer, and hold the bot with it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def outcome_without_a_writer(fifo: Path, read: Callable[[], Any], wait_s: float = 10) -> Any:
    """What `read` (which opens `fifo`) returned, or the exception it raised, run in a thread. Raises AssertionError
    where it still waits after `wait_s`, once a writer that opens and closes the FIFO has let it go."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(read())
        except BaseException as exc:  # noqa: BLE001 - what the reading thread raised is the answer
            outcome.append(exc)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    reader.join(wait_s)
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let the stuck reader go
        reader.join(wait_s)
        raise AssertionError("reading a FIFO waited for a writer")
    return outcome[0]
