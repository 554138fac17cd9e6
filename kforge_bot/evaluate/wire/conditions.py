"""The conditions each timed sample ran in, read by the worker outside the timed region, and what they mean.

Interleaving cancels load that hits both sides alike, not load that hits one side harder: a reference on two
threads beside a busy loop stalls at every barrier while a one-thread kernel barely notices. So every sample
carries what the machine and the process did meanwhile: the machine's runnable tasks against its cores
(/proc/loadavg), the process's involuntary context switches and CPU time against the wall time (getrusage), on a CPU
target how long its threads waited, runnable, for a core (/proc/self/task/*/schedstat), its thread count, and on
NVIDIA GPUs the clocks and throttle reasons (NVML, where importable). `summarize` condenses them per side;
`disturbance` says in one line why they make a timing no verdict, or None.

`others_alive` lists the processes of this sandbox besides the worker: a helper process busy only while one side
runs steers the comparison, so none may be alive while a timed sample runs.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from typing import Any

from kforge_bot.evaluate.wire.activity import read_proc

_monotonic = time.monotonic  # bound at import, before any candidate code exists
_getrusage = resource.getrusage
_listdir = os.listdir
_open, _pread, _close = os.open, os.pread, os.close
_getpid = os.getpid
_getppid = os.getppid
CORES = os.cpu_count() or 1

# The policy's defaults (evaluation.disturbance): beyond these a timing is no verdict.
PREEMPTED_SHARE = 0.75  # a side's samples with an involuntary context switch
PREEMPTED_GAP = 0.3  # ... or more on one side than on the other by this share (load hitting one side harder)
CROWDED_SHARE = 0.5  # samples during which the machine had more runnable tasks than cores
# A side's run-queue wait as a share of its threads' runnable time (waiting + running). On the 2-core VM, idle: at most
# 0.09; beside a process busy a third of a core (which no other rule saw, and which moved the bundled kernel's figure
# by up to 25%): 0.12-0.25, at least 0.19 on the side that waited most (benchmarks/results/disturbed_timing_cpu.md).
WAIT_SHARE = 0.15
# NVML's throttle reasons that slow a kernel down behind its back: hardware slowdown, software and hardware thermal
# slowdown, power brake (not the idle, application-clock or power-cap bits, which a busy healthy GPU shows too).
SLOWDOWN_REASONS = 0x08 | 0x20 | 0x40 | 0x80


@dataclass(frozen=True)
class Limits:
    """How disturbed a timing may be and still count (policy evaluation.disturbance; 1.0 switches a rule off)."""

    preempted_share: float
    preempted_gap: float
    crowded_share: float
    wait_share: float = 1.0


def policy_limits(preempted_share: float | None = None, preempted_gap: float | None = None,
                  crowded_share: float | None = None, wait_share: float | None = None) -> Limits:
    """The policy's limits, this module's defaults where it sets none (read when called)."""
    return Limits(PREEMPTED_SHARE if preempted_share is None else preempted_share,
                  PREEMPTED_GAP if preempted_gap is None else preempted_gap,
                  CROWDED_SHARE if crowded_share is None else crowded_share,
                  WAIT_SHARE if wait_share is None else wait_share)


def runnable_tasks() -> int | None:
    """The machine's runnable tasks now (this reader included), from /proc/loadavg's running count."""
    fields = read_proc("/proc/loadavg").split()
    try:
        return int(fields[3].split("/")[0])
    except (IndexError, ValueError):
        return None


class RunQueueWait:
    """How long this process's threads have waited, runnable, for a CPU (each thread's /proc/<tid>/schedstat second
    field, in ns). Each thread's file stays open: a pread costs about 2 us where an open and a read cost 40, and this
    is read twice a sample."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def seconds(self) -> float:
        """The threads' waits so far, in seconds; 0 where the kernel keeps no such count."""
        try:
            tids = _listdir("/proc/self/task")
        except OSError:
            return 0.0
        total = 0
        for tid in tids:
            fields = self._read(tid).split()
            if len(fields) > 1 and fields[1].isdigit():
                total += int(fields[1])
        for gone in set(self._fds) - set(tids):
            _close_quietly(self._fds.pop(gone))
        return total / 1e9

    def _read(self, tid: str) -> bytes:
        for _ in range(2):  # a file of a thread that has ended (its id reused since) is opened again once
            fd = self._fds.get(tid)
            try:
                if fd is None:
                    fd = self._fds[tid] = _open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
                return _pread(fd, 128, 0)
            except OSError:
                if tid in self._fds:
                    _close_quietly(self._fds.pop(tid))
        return b""

    def close(self) -> None:
        for fd in self._fds.values():
            _close_quietly(fd)
        self._fds.clear()

    def __del__(self) -> None:  # a Gauge's reader goes with it (one per timed side or measure_pair call)
        self.close()


def _close_quietly(fd: int) -> None:
    try:
        _close(fd)
    except OSError:
        pass


def thread_count() -> int:
    for line in read_proc("/proc/self/status").splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


class Gauge:
    """One reading before a sample and one after: the sample's conditions (`take`)."""

    def __init__(self, gpu: Any = None, waits: bool = False) -> None:
        self._gpu = gpu
        # A CPU target's: a read per thread twice a sample, more than a GPU's short samples should pay.
        self._waits = RunQueueWait() if waits else None
        self._wait = 0.0
        self._start: tuple[float, float, int] = (0.0, 0.0, 0)

    def begin(self) -> None:
        usage = _getrusage(resource.RUSAGE_SELF)
        if self._waits is not None:
            self._wait = self._waits.seconds()
        self._start = (_monotonic(), usage.ru_utime + usage.ru_stime, usage.ru_nivcsw)

    def take(self) -> dict[str, Any]:
        usage = _getrusage(resource.RUSAGE_SELF)
        # A thread that ended meanwhile takes its waits with it: never below 0.
        waited = max(0.0, self._waits.seconds() - self._wait) if self._waits is not None else None
        wall = _monotonic() - self._start[0]
        cpu = usage.ru_utime + usage.ru_stime - self._start[1]
        running = runnable_tasks()
        reading: dict[str, Any] = {
            "wall_ms": round(wall * 1e3, 4), "cpu_ms": round(cpu * 1e3, 4),
            "involuntary_switches": usage.ru_nivcsw - self._start[2],
            "runnable": running, "threads": thread_count(),
        }
        if waited is not None:
            reading["wait_ms"] = round(waited * 1e3, 4)
        if self._gpu is not None:
            reading.update(self._gpu.read())
        return reading


class NvmlClocks:
    """An NVIDIA GPU's SM clock and throttle reasons, through pynvml (None where it is not importable)."""

    def __init__(self, index: int) -> None:
        import pynvml  # noqa: PLC0415 - optional: the NVIDIA management library's bindings

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)

    @classmethod
    def open(cls, kind: str, index: int) -> NvmlClocks | None:
        if kind != "cuda":
            return None
        try:
            return cls(index)
        except Exception:  # noqa: BLE001 - no pynvml, no driver library: the GPU part stays unmeasured
            return None

    def read(self) -> dict[str, Any]:
        try:
            nvml = self._nvml
            reasons = nvml.nvmlDeviceGetCurrentClocksThrottleReasons(self._handle)
            return {"sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM),
                    "throttle": int(reasons) & SLOWDOWN_REASONS}
        except Exception:  # noqa: BLE001
            return {}


def others_alive() -> list[str]:
    """The processes beside this one that the candidate could have started, as 'pid name' (zombies left out:
    they run nothing). In the sandbox's own PID namespace (the worker's parent is its PID 1) every process but
    that one and this one; outside it, this process's descendants."""
    me, parent_is_init = _getpid(), _getppid() == 1
    table: dict[int, tuple[int, str, str]] = {}
    for name in _listdir("/proc"):
        if not name.isdigit():
            continue
        stat = read_proc(f"/proc/{name}/stat")
        head, _, tail = stat.rpartition(")")
        fields = tail.split()
        if not head or len(fields) < 2:
            continue
        table[int(name)] = (int(fields[1]), fields[0], head.partition("(")[2])
    found = []
    for pid, (ppid, state, comm) in table.items():
        if pid == me or state == "Z":
            continue
        if parent_is_init:
            if pid != 1:
                found.append(f"{pid} {comm}")
            continue
        seen, up = 0, ppid
        while up in table and up != me and seen < 64:
            up, seen = table[up][0], seen + 1
        if up == me:
            found.append(f"{pid} {comm}")
    return sorted(found)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def summarize(readings: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's samples condensed: how many were preempted, how crowded the machine was, the CPU the process
    used per wall second (how many threads were busy), its threads, and on a GPU the clock and throttling."""
    if not readings:
        return {}
    n = len(readings)
    runnable = [r["runnable"] for r in readings if r.get("runnable") is not None]
    summary: dict[str, Any] = {
        "samples": n,
        "preempted_share": round(sum(1 for r in readings if r.get("involuntary_switches", 0) > 0) / n, 3),
        "involuntary_switches": sum(int(r.get("involuntary_switches", 0)) for r in readings),
        "busy_threads": round(_median([r["cpu_ms"] / r["wall_ms"] for r in readings if r.get("wall_ms")]), 2),
        "threads": max(int(r.get("threads", 0)) for r in readings),
        "cores": CORES,
    }
    waits = [r for r in readings if "wait_ms" in r]
    if waits:  # the share of its threads' runnable time the side spent waiting for a core
        summary["wait_share"] = round(sum(r["wait_ms"] for r in waits)
                                      / max(1e-9, sum(r["wait_ms"] + r["cpu_ms"] for r in waits)), 4)
    if runnable:
        # Our own busy threads are among the machine's runnable tasks: more than the cores means a wait for one.
        summary["runnable_median"] = _median([float(x) for x in runnable])
        summary["crowded_share"] = round(sum(1 for x in runnable if x > CORES) / len(runnable), 3)
    clocks = [r["sm_clock_mhz"] for r in readings if "sm_clock_mhz" in r]
    if clocks:
        summary["sm_clock_mhz"] = [min(clocks), max(clocks)]
        summary["throttled_share"] = round(sum(1 for r in readings if r.get("throttle")) / n, 3)
    return summary


def disturbance(sides: dict[str, dict[str, Any]], limits: Limits | None = None) -> str | None:
    """Why one timing's conditions (`summarize` per side: "baseline", "candidate") make it no verdict, in one
    line, or None where they are within the limits."""
    allowed = limits or policy_limits()
    b, c = sides.get("baseline") or {}, sides.get("candidate") or {}
    if not b or not c:
        return None
    pb, pc = b.get("preempted_share", 0.0), c.get("preempted_share", 0.0)
    if abs(pb - pc) > allowed.preempted_gap:
        more, less = ("baseline", "candidate") if pb > pc else ("candidate", "baseline")
        return (f"the {more}'s samples were preempted far more often than the {less}'s ({max(pb, pc):.0%} against "
                f"{min(pb, pc):.0%}): load hit one side harder")
    if max(pb, pc) > allowed.preempted_share:
        return (f"{max(pb, pc):.0%} of one side's samples were preempted by other work (limit "
                f"{allowed.preempted_share:.0%})")
    crowded = max(b.get("crowded_share", 0.0), c.get("crowded_share", 0.0))
    if crowded > allowed.crowded_share:
        return (f"the machine had more runnable tasks than its {b.get('cores', CORES)} cores during {crowded:.0%} "
                f"of the samples (limit {allowed.crowded_share:.0%})")
    for name, side in (("baseline", b), ("candidate", c)):
        if side.get("wait_share", 0.0) > allowed.wait_share:
            return (f"the {name}'s threads waited for a core {side['wait_share']:.0%} of the time they were ready to "
                    f"run (limit {allowed.wait_share:.0%}): other work took the machine's {side.get('cores', CORES)} "
                    f"cores")
    for side in (b, c):
        if side.get("throttled_share", 0.0) > 0.0:
            return f"the GPU throttled its clocks during {side['throttled_share']:.0%} of one side's samples"
    return None
