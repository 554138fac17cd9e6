"""The worker ends with the bot, even where the bot is killed outright.

A bot killed by SIGKILL runs nothing after, and a side it had stopped for the other's timed samples
(evaluate.turns) would stay stopped for good, holding its memory and device. Sandboxed, bubblewrap's
--die-with-parent ends the whole sandbox; unsandboxed, the kernel sends the worker SIGKILL when the thread that
started it ends (PR_SET_PDEATHSIG), and SIGKILL ends a stopped process too. A bot that dies before the setting takes
has left the worker no stop: it reads the end of its closed stdin and exits.
"""

from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1  # prctl's option (linux/prctl.h)


def die_with_parent(enabled: bool = True) -> bool:
    """SIGKILL to this process when its parent ends (`enabled`; else no signal at all). False where the system has
    no such setting."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    prctl.restype = ctypes.c_int
    return prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL if enabled else 0), ctypes.c_ulong(0), ctypes.c_ulong(0),
                 ctypes.c_ulong(0)) == 0
