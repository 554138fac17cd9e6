"""A profiled run's status file lies in the sandbox's scratch, written by the code it profiles
(kforge_bot.counters.profiled_run): the bot reads it as a plain file of its own size or not at all."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from kforge_bot.counters.profiled_run import _status


def test_a_status_file_made_a_link_or_a_fifo_is_not_followed_nor_waited_on(tmp_path: Path) -> None:
    # Red-team pass: a link read a file of the bot's machine outside the sandbox (/dev/zero: memory without end),
    # a FIFO with no writer held the bot forever.
    secret = tmp_path / "outside.json"
    secret.write_text(json.dumps({"token": "ghp_outside_the_sandbox"}))
    link = tmp_path / "work" / "status.json"
    link.parent.mkdir()
    link.symlink_to(secret)
    assert _status(link) == {}
    fifo = tmp_path / "fifo" / "status.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    answers: list[dict] = []
    reader = threading.Thread(target=lambda: answers.append(_status(fifo)), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let the stuck reader go
        reader.join(10)
        raise AssertionError("reading a FIFO waited for a writer")
    assert answers == [{}]
    plain = tmp_path / "plain" / "status.json"
    plain.parent.mkdir()
    plain.write_text('{"phase": "done"}')
    assert _status(plain) == {"phase": "done"}
