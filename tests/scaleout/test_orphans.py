"""A dead slot's orphans: processes marked with the slot's mark are found and killed, and no others."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kforge_bot.scaleout.orphans import SLOT_MARK, kill_marked, marked_pids

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="marks are read from /proc (Linux)")


def _sleeper(mark: str | None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != SLOT_MARK}
    if mark is not None:
        env[SLOT_MARK] = mark
    # Its own session, as an evaluation child has: kill_marked kills its process group too.
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env, start_new_session=True)


def test_marked_processes_are_found_and_killed_and_others_left_alone() -> None:
    marked, other, unmarked = _sleeper("test-mark-1"), _sleeper("test-mark-2"), _sleeper(None)
    try:
        deadline = time.monotonic() + 10
        while marked.pid not in marked_pids("test-mark-1") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked_pids("test-mark-1") == [marked.pid]
        assert kill_marked("test-mark-1") == 1
        assert marked.wait(timeout=10) == -9
        assert marked_pids("test-mark-1") == [] and kill_marked("test-mark-1") == 0
        assert other.poll() is None and unmarked.poll() is None
        assert marked_pids("") == []  # no mark, nothing found (never every process)
    finally:
        for proc in (marked, other, unmarked):
            proc.kill()
            proc.wait()
