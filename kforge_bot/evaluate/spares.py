"""A candidate worker started ahead for the next evaluation of the same kernel on the same target.

A worker's start is mostly torch's import and the device's context (about 2 s on an H200 with a warm file
cache, benchmarks/results/evaluation_speed_h200.md); a session that judges candidates one after another
(`optimize`, a pool slot) pays it on every candidate. With a `SpareWorkers`, `evaluate()` has the next
candidate's worker started before the caller needs it:
- on a GPU target, as the evaluation begins: the spare's interpreter and imports (host work) overlap this
  evaluation, and it touches the device (context, profiler) only once this evaluation's timing is over
  (`release`), so no second context is made while a timed run is on the GPU;
- on the CPU target, as the evaluation ends: there the imports would take cores from the timed runs.
Started at the end only, a spare was still booting when the next candidate came (a scripted model answers at
once; measured on the dev VM: the request waited 1.5 s of a 1.55 s boot).

Where base and head are timed in workers of their own (evaluate.side_workers), the base's worker is started
ahead the same way, beside the head's (`prepare(..., base=...)`, `take_base`): otherwise the head's worker was
ready and the evaluation still waited for the base's interpreter and torch import. On a GPU, a gate decision's
confirmation run takes the pair its first run started (gate.measure.compare).

Isolation is unchanged: a spare is a fresh process with its own fresh scratch directory, it runs trusted
code only until its one request arrives, and it serves exactly one evaluation. A spare that no evaluation
takes (another kernel came next, the session ended) is killed by `close()`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kforge_bot.evaluate.sandbox import WorkerProcess
from kforge_bot.evaluate.scratch import remove_scratch


@dataclass
class Spare:
    key: str  # what the worker was started for: the sandbox's view (less its scratch) and the target
    worker: WorkerProcess
    work: Path  # its scratch directory, which the evaluation that takes it uses as its own


Starter = Callable[[], tuple[WorkerProcess, Path]]


class SpareWorkers:
    """At most one spare for the head (or a lone candidate) and one for the base: sessions judge one kernel at a
    time, and more idle workers would only hold more device contexts."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root  # where spares' scratch directories go (None: the evaluations' usual place)
        self._spare: Spare | None = None
        self._base: Spare | None = None
        self._lock = threading.Lock()
        self.taken = 0  # evaluations that found their (head's) worker started (for the report's phases and tests)
        self.taken_base = 0  # and those that found the base's

    def take(self, key: str) -> Spare | None:
        """The spare started for `key`, or None (none ready, or one for something else, which is discarded)."""
        with self._lock:
            spare, self._spare = self._spare, None
        spare = _usable(spare, key)
        self.taken += spare is not None
        return spare

    def take_base(self, key: str) -> Spare | None:
        """The base's spare started for `key` (as `take`)."""
        with self._lock:
            spare, self._base = self._base, None
        spare = _usable(spare, key)
        self.taken_base += spare is not None
        return spare

    def prepare(self, key: str, start: Starter, base: tuple[str, Starter] | None = None) -> None:
        """Start a spare for `key` (replacing one for anything else), and with `base` (its key and how to start
        it) the base's beside it; without, a base spare left from before is discarded."""
        head_spare = Spare(key, *start())
        base_spare = Spare(base[0], *base[1]()) if base is not None else None
        with self._lock:
            old = [self._spare, self._base]
            self._spare, self._base = head_spare, base_spare
        for spare in old:
            if spare is not None:
                _discard(spare)

    def release(self) -> None:
        """Let the spares warm up their device: the timed run they were started beside is over."""
        with self._lock:
            spares = [s for s in (self._spare, self._base) if s is not None]
        for spare in spares:
            spare.worker.release_device()

    def close(self) -> None:
        with self._lock:
            spares = [s for s in (self._spare, self._base) if s is not None]
            self._spare = self._base = None
        for spare in spares:
            _discard(spare)


def _usable(spare: Spare | None, key: str) -> Spare | None:
    """`spare` where it was started for `key` and still runs; anything else is discarded."""
    if spare is None:
        return None
    if spare.key != key or spare.worker.proc.poll() is not None:
        _discard(spare)
        return None
    return spare


def _discard(spare: Spare) -> None:
    spare.worker.discard()
    remove_scratch(spare.work)
