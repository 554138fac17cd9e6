"""Only the side being timed runs: while one worker takes a timed sample, the other's processes are all stopped.

Base and head each have a worker (evaluate.side_workers); between its own samples a worker idles on its stdin.
Idle is not inert: a signal handler, a timer, a thread or a helper the head left behind would run then, on the
cores the base's sample is timed on, and make the base look slower. So the parent gives the turn to one side at a
time: every process of the other side is sent SIGSTOP (threads stop with their process) and is confirmed stopped
before the turn's first request goes out; SIGCONT gives the turn back.

Which processes are a side's: its worker process and every descendant. Sandboxed, that is the whole sandbox, by
construction: bubblewrap's outer process starts the sandbox's init (pid 1 of a pid namespace of its own), every
process inside descends from it, and an orphan inside is re-parented to that init, never outside; a process that
leaves its process group or session (setsid) is still in the tree. Unsandboxed (policy isolation: off, a trusted
machine), a process that double-forks away is re-parented outside the tree and not stopped.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Iterable

STOP_WAIT_S = 2.0  # how long a process may take to reach its stop (one in an uninterruptible wait finishes it first)


def descendants(root: int) -> list[int]:
    """`root` and every process below it, from each thread's `children` list (a process's children are split
    among the threads that started them); a process gone meanwhile is left out."""
    found: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        found.append(pid)
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as children:
                    todo.extend(int(c) for c in children.read().split())
            except (OSError, ValueError):
                continue
    return found


_STILL = frozenset("TtZX")  # stopped, stopped by a tracer, dead


def _runs(pid: int) -> bool:
    """Whether any thread of the process may still run: each thread's own state, since a process whose first thread
    has exited (a zombie leader) can have others running."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        if text[text.rindex(")") + 2:][:1] not in _STILL:
            return True
    return False


def _signal(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass  # gone, or a pid reused by another user's process since it was listed


def stop_tree(root: int) -> list[int]:
    """Stop `root` and all its descendants, and wait until each is stopped; the stopped pids.

    Listed again after every round: a process may have started a child before its stop landed, and that child is
    stopped in the next round; one found running again is signalled again (a tracer of its own could have let it
    go on before the tracer itself stopped). Done when a listing finds everything stopped (or gone)."""
    stopped: set[int] = set()
    deadline = time.monotonic() + STOP_WAIT_S
    while True:
        found = descendants(root)
        running = [pid for pid in found if _runs(pid)]
        if not running:
            return sorted(stopped)
        _signal(running, signal.SIGSTOP)  # again for one still on its way: a pending stop is not stopped twice
        stopped.update(running)
        if time.monotonic() > deadline:  # stuck in an uninterruptible wait: it stops on leaving it
            return sorted(stopped)
        time.sleep(0.0005)


def continue_tree(root: int) -> None:
    """SIGCONT `root` and all its descendants (harmless on those not stopped)."""
    _signal(descendants(root), signal.SIGCONT)


class Turns:
    """One turn at a time among named process trees, each a worker's process (a `subprocess.Popen`): `give(name)`
    stops every other tree and lets `name`'s run; `release()` lets all run again, and is safe to call more than
    once. A worker already reaped is never signalled: its pid may be another process's by now."""

    def __init__(self, procs: dict[str, Any]) -> None:
        self.procs = dict(procs)
        self.stopped: set[str] = set()

    def _alive(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def give(self, name: str) -> None:
        for other in self.procs:
            if other != name and other not in self.stopped and self._alive(other):
                self.stopped.add(other)  # first: a release after a failure below still continues it
                stop_tree(self.procs[other].pid)
        if name in self.stopped:
            self.stopped.discard(name)
            if self._alive(name):
                continue_tree(self.procs[name].pid)

    def release(self) -> None:
        for name in sorted(self.stopped):
            if self._alive(name):
                continue_tree(self.procs[name].pid)
        self.stopped.clear()
