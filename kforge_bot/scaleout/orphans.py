"""A dead slot's orphaned children: every evaluation child carries its slot's mark in its environment, so
what a slot process left running when it died (or was killed) can be found and killed."""

from __future__ import annotations

import os
import signal


SLOT_MARK = "KFORGE_POOL_SLOT"  # in every slot's environment: finds a dead slot's orphaned children


def marked_pids(mark: str) -> list[int]:
    """Every process (but this one) whose environment carries SLOT_MARK=mark. Linux /proc only; elsewhere
    nothing is found."""
    if not mark:
        return []
    needle = f"{SLOT_MARK}={mark}".encode() + b"\0"
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read() + b"\0"
        except OSError:
            continue
        if needle in environ:
            found.append(int(entry))
    return found


def kill_marked(mark: str) -> int:
    """SIGKILL every process marked with `mark` (a dead slot's evaluation children, which live in their own
    sessions) and its process group; returns how many there were."""
    killed = 0
    for pid in marked_pids(mark):
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, PermissionError):
            pass
    return killed

