"""What the bot and its forkserver (evaluate.worker.forkserver) say to each other over their socket.

The bot's first message is bwrap's argument list for a probe's view, {"probe": [...]}, and the forkserver answers
{"ready": bool, "problem": str} once it has made and ended that sandbox. Then each start is {"bwrap": [...],
"env": {...}, "argv": [...], "entry": one of ENTRIES} with the worker's pipes as file descriptors (CHILD_FDS'
order: stdin, stdout, stderr, the result channel, and the outputs socket where it has one), answered {"pid": N}
with the read end of a pipe on which the child's wait status arrives (`encode_status`) when it ends.
"""

from __future__ import annotations

import os

# The workers a forkserver imports and may become: the harness's, and a workload's run (kforge_bot.workloads).
ENTRIES = ("kforge_bot.evaluate.worker.entry", "kforge_bot.workloads.worker")
CHILD_FDS = (0, 1, 2, 3, 4)  # where a forked worker finds its pipes: the result channel is always fd 3
MAX_MESSAGE = 1 << 20  # bwrap's argument list for a view with many folders: a few kilobytes
MAX_FDS = len(CHILD_FDS)


def channel_argument(with_outputs: bool) -> str:
    """The worker's first argument (worker.entry.main): its channel's fd, and its outputs socket's."""
    return f"{CHILD_FDS[3]}:{CHILD_FDS[4]}" if with_outputs else str(CHILD_FDS[3])


def encode_status(status: int) -> bytes:
    """A wait status as `subprocess` reports it: the exit code, or minus the signal that ended the process."""
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    return f"{code}\n".encode()


def decode_status(data: bytes) -> int | None:
    try:
        return int(data.decode().strip())
    except (UnicodeDecodeError, ValueError):
        return None
