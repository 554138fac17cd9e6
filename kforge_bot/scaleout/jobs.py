"""What goes through an evaluation pool's queue: a job, the marker that stops a slot, and the result that
comes back (the local pool and the Ray executor share them)."""

from __future__ import annotations

import queue
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kforge_bot.evaluate.references import Progress

STOP = object()  # put on the queue once per slot: that slot's driver stops


@dataclass
class PoolResult:
    """One evaluation's result and where and how long it ran."""

    result: Any  # EvalResult
    eval_s: float  # inside evaluate(), in the slot
    queue_s: float = 0.0  # submitted -> a slot took it (compile-ahead included)
    prepare_s: float | None = None  # compile-ahead on the CPU, when it ran
    prepare: str = "not needed"  # "built" | "failed: ..." | "not needed"
    slot: int = -1
    device: str = ""
    started: float = 0.0  # time.monotonic() when the slot took it, and when it finished
    finished: float = 0.0


@dataclass
class Job:
    spec: Any
    candidate: Any
    settings: Any
    seeds: list[int]
    baseline: Any
    future: Future
    progress: Progress | None = None
    submitted: float = field(default_factory=time.monotonic)
    prepare_s: float | None = None
    prepare: str = "not needed"


def drain(ready: queue.Queue[Any]) -> list[Any]:
    """Take every job still waiting in a pool's queue (stop markers are dropped)."""
    jobs = []
    while True:
        try:
            job = ready.get_nowait()
        except queue.Empty:
            return jobs
        if job is not STOP:
            jobs.append(job)


