"""The resource limits on every worker (a process that runs user code), decided in this one place.

- Memory: RLIMIT_AS on each process (its address space: every mapping, shared anonymous memory included, which
  a data limit would not count). By default on targets whose memory is the host's (cpu, mps) only: a CUDA or
  XPU context reserves address space by the terabyte, which an address-space limit refuses, so GPU targets rely
  on the device's own limit and have no host-memory limit unless `memory_limit_bytes` sets one (which then
  breaks their contexts: set it for cpu-only policies).
- Processes: RLIMIT_NPROC. Counted per user namespace (Linux 5.14+), so inside the sandbox it counts the
  sandbox's own processes and threads alone; unsandboxed it would count every process of this user on the
  machine, so it is set in the sandbox only.
- CPU time: RLIMIT_CPU on each process (all its threads): SIGXCPU, then SIGKILL five seconds later.
- Scratch: the worker's scratch folder (in memory-backed /dev/shm where the machine has it) may hold this much
  in all: the bot measures it every half second and stops a worker over it (`sandbox.WorkerProcess.run`); no
  single file may grow past it (RLIMIT_FSIZE: the write fails at once); the sandbox's private /tmp, /dev/shm and
  /run are folders of the scratch, counted with it (evaluate.isolation).

RLIMIT_* are per process: a process that forks gets the same limits again, so a fork bomb's total memory is
bounded only by the process limit times the memory limit. Cgroups (v2) would bound the sum; they need a
delegated cgroup, which a CI runner rarely gives an unprivileged user, and are not used.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from kforge_bot.targets import target_kind

GIB = 1 << 30
DEFAULT_PROCESSES = 4096  # a worker's threads count too: torch's pools, and ninja running nvcc, cicc, ptxas, gcc
MEMORY_SHARE = 0.5  # of the machine's memory, for each worker process
SCRATCH_SHARE = 0.5  # of the scratch folder's file system
SCRATCH_CEILING = 64 * GIB
CPU_GRACE_S = 5
ENTRY_BYTES = 1024
_HOST_MEMORY_TARGETS = ("cpu", "mps")


@dataclass(frozen=True)
class Limits:
    """One worker's limits (None: not limited)."""

    memory_bytes: int | None
    processes: int | None
    cpu_s: int | None
    scratch_bytes: int

    def to_dict(self) -> dict[str, int | None]:
        return {"memory_bytes": self.memory_bytes, "processes": self.processes, "cpu_s": self.cpu_s,
                "scratch_bytes": self.scratch_bytes}

    @classmethod
    def from_dict(cls, data: dict[str, int | None]) -> Limits:
        return cls(data.get("memory_bytes"), data.get("processes"), data.get("cpu_s"), int(data["scratch_bytes"] or 0))


def _physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def default_scratch_bytes(scratch_root: str) -> int:
    try:
        stats = os.statvfs(scratch_root)
        size = stats.f_frsize * stats.f_blocks
    except OSError:
        size = SCRATCH_CEILING
    return int(min(SCRATCH_CEILING, max(GIB, size * SCRATCH_SHARE)))


def limits_for(settings: object, target: str, sandboxed: bool, scratch_root: str) -> Limits:
    """The limits a worker on `target` runs under: `settings`' own (EvalSettings' *_limit_* fields, from the
    policy's `evaluation` section) where it sets them, else the defaults above."""
    kind = target_kind(target)
    memory = getattr(settings, "memory_limit_bytes", None)
    if memory is None and kind in _HOST_MEMORY_TARGETS:
        memory = int(_physical_memory() * MEMORY_SHARE)
    processes = getattr(settings, "process_limit", None) or DEFAULT_PROCESSES
    cpu = getattr(settings, "cpu_limit_s", None)
    if cpu is None:  # never before the wall-clock timeout with every core busy: a backstop for what outlives it
        cpu = int(float(getattr(settings, "timeout_s", 300.0)) * (os.cpu_count() or 1)) + 60
    scratch = getattr(settings, "scratch_limit_bytes", None) or default_scratch_bytes(scratch_root)
    return Limits(memory_bytes=memory or None, processes=processes if sandboxed else None, cpu_s=int(cpu),
                  scratch_bytes=int(scratch))


def apply(limits: Limits) -> None:
    """Set `limits` on this process (soft and hard alike: no process may raise them again), before any user code
    runs in it. Every process it starts inherits them."""
    def lower(which: int, value: int, hard: int | None = None) -> None:
        _, current_hard = resource.getrlimit(which)
        cap = value if hard is None else hard
        if current_hard != resource.RLIM_INFINITY:
            cap, value = min(cap, current_hard), min(value, current_hard)
        resource.setrlimit(which, (value, cap))

    if limits.memory_bytes:
        lower(resource.RLIMIT_AS, limits.memory_bytes)
    if limits.processes:
        lower(resource.RLIMIT_NPROC, limits.processes)
    if limits.cpu_s:
        lower(resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + CPU_GRACE_S)
    lower(resource.RLIMIT_FSIZE, limits.scratch_bytes)


def folder_bytes(folder: str, stop_at: int) -> int:
    """The bytes `folder` holds (allocated blocks, links not followed), counted until `stop_at` is passed. Each
    entry counts ENTRY_BYTES more: a million empty files hold memory too (inodes and names on a tmpfs). A folder
    its code made unreadable (`chmod 000`) gets its owner's permissions back to be counted (the sandbox's user is
    this user); one that still cannot be looked into (nested past PATH_MAX) counts as full: what it holds is
    unseen, not nothing."""
    total, todo = 0, [folder]
    while todo and total <= stop_at:
        path = todo.pop()
        try:
            try:
                found = os.scandir(path)
            except PermissionError:
                os.chmod(path, 0o700)
                found = os.scandir(path)
            with found:
                for entry in found:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed while counted
                    total += info.st_blocks * 512 + ENTRY_BYTES
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed or replaced while counted
        except OSError:
            return stop_at + 1
    return total
