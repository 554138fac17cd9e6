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

Isolation is unchanged: a spare is a fresh process with its own fresh scratch directory, it runs trusted
code only until its one request arrives, and it serves exactly one evaluation. A spare that no evaluation
takes (another kernel came next, the session ended) is killed by `close()`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kforge_bot.evaluate.sandbox import WorkerProcess, remove_scratch


@dataclass
class Spare:
    key: str  # what the worker was started for: the sandbox's view (less its scratch) and the target
    worker: WorkerProcess
    work: Path  # its scratch directory, which the evaluation that takes it uses as its own


class SpareWorkers:
    """At most one spare: sessions judge one kernel at a time, and a second idle worker would only hold a
    second device context."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root  # where spares' scratch directories go (None: the evaluations' usual place)
        self._spare: Spare | None = None
        self._lock = threading.Lock()
        self.taken = 0  # evaluations that found their worker started (for the report's phases and tests)

    def take(self, key: str) -> Spare | None:
        """The spare started for `key`, or None (none ready, or one for something else, which is discarded)."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is None:
            return None
        if spare.key != key or spare.worker.proc.poll() is not None:
            _discard(spare)
            return None
        self.taken += 1
        return spare

    def prepare(self, key: str, start: Callable[[], tuple[WorkerProcess, Path]]) -> None:
        """Start a spare for `key` (replacing one for anything else)."""
        worker, work = start()
        with self._lock:
            old, self._spare = self._spare, Spare(key, worker, work)
        if old is not None:
            _discard(old)

    def release(self) -> None:
        """Let the spare warm up its device: the timed run it was started beside is over."""
        with self._lock:
            spare = self._spare
        if spare is not None:
            spare.worker.release_device()

    def close(self) -> None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            _discard(spare)


def _discard(spare: Spare) -> None:
    spare.worker.discard()
    remove_scratch(spare.work)
