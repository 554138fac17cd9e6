"""What a worker is doing, read from outside it: a build, or a hang.

A first call may build (a lazy load_inline, a Triton JIT, torch.compile), which the clock alone cannot tell from
a hang. They look different from the host: a build keeps a compiler process running or the process reading and
writing files (headers, sources, the cache, the library it loads), while a hang does neither: a CPU kernel that
never returns spins without a system call, and a GPU kernel that never finishes leaves the host waiting in the
driver. `BuildWatch` reads the worker's process tree from /proc (its processes, their CPU time, the bytes they
read and wrote) and says when it last looked like a build.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class TreeReading:
    processes: int  # the worker's process tree, its root included
    cpu_s: float  # their user and system CPU time
    io_bytes: int  # bytes they read and wrote through system calls (files, pipes), where /proc shows it


def read_proc(path: str) -> str:
    """A /proc file's text, or '' where the process (or the file) is gone."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a live process, or None (gone, a zombie)."""
    text = read_proc(f"/proc/{pid}/stat")
    _, _, tail = text.rpartition(")")
    fields = tail.split()
    if len(fields) < 13 or fields[0] == "Z":
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks


def _io(pid: int) -> int:
    total = 0
    for line in read_proc(f"/proc/{pid}/io").splitlines():
        key, _, value = line.partition(":")
        if key in ("rchar", "wchar"):
            total += int(value)
    return total


def read_tree(root: int) -> TreeReading:
    """The process tree under `root` (root included) as /proc shows it now."""
    table: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            entry = _stat(name)
            if entry is not None:
                table[int(name)] = entry
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    members, stack = [], [root] if root in table else []
    while stack:
        pid = stack.pop()
        members.append(pid)
        stack.extend(children.get(pid, ()))
    return TreeReading(len(members), sum(table[p][1] for p in members), sum(_io(p) for p in members))


class BuildWatch:
    """Whether a worker's tree still looks like a build. `look(now)` reads it; `last_active` is the last time it
    had more processes than when the watch began (a compiler, a build tool) or read or wrote more bytes than the
    channel's own messages explain."""

    IO_SLACK = 64 << 10  # bytes a tree may move between looks without counting as a build (its progress messages)

    def __init__(self, root: int, now: float) -> None:
        self.root = root
        self.last_active = now
        self.cpu_s = 0.0  # CPU time the tree used since the last sign of a build
        first = read_tree(root)
        self._base_processes = first.processes
        self._last = first

    def look(self, now: float) -> None:
        reading = read_tree(self.root)
        if reading.processes == 0:
            return
        building = (reading.processes > self._base_processes
                    or reading.io_bytes - self._last.io_bytes > self.IO_SLACK)
        if building:
            self.last_active, self.cpu_s = now, 0.0
        else:
            self.cpu_s += max(0.0, reading.cpu_s - self._last.cpu_s)
        self._last = reading
