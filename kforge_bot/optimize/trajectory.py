"""The record of one optimization run: every prompt, reply, candidate and result, under the moment it happened.

A report directory holds:

    trajectory.jsonl   one JSON event per line, flushed and fsynced as it is written
    candidates/        each candidate's source (0001.py, 0002.py, ...) and the kernel as written (baseline.py)
    best.<ext>         a copy of the best candidate, when one beat the kernel as written
    report.md, plot.png  written at the end of each session (kforge_bot.optimize.report)
    ncu-details.csv, ncu/  the hardware counters of the kernel as written and the best candidate, and ncu's
                     raw output per profiled version (CUDA targets with ncu; kforge_bot.optimize.counters)

The loop keeps no state of its own that is not in the trajectory: `RunRecord.apply` (kforge_bot.optimize.record)
folds each event into the run's state as it is appended, so `--resume` (replaying the file) reaches exactly the
state the stopped run had, and the report is a function of the file alone.

Events (each line also carries "event", "time" (Unix seconds) and "session"):
    start            kernel, files, target, mode (the proposer: llm | tuner), model/endpoint, settings, budgets, rules
    session          a session began (the first, or a resume)
    baseline         the kernel as written, evaluated against itself: its time, profile, correctness
    workload         bytes (and FLOPs when known) per shape set, for the roofline
    ceilings         the roofline's ceilings for this device, and where they come from
    tunables         (tuner) the parameters found in the kernel
    prompt, reply    one LLM exchange (agent: generator | analyst), with token counts
    prompt_trimmed   the server said the prompt does not fit its context window: the next prompt is shorter
                     (step of kforge_bot.optimize.llm_proposer's trim rule, and the sizes when the server said them)
    malformed        a reply that could not be used (it costs its iteration)
    candidate        a candidate's file, hash and, for the tuner, the assignment it tries; with --parallel
                     also its round, the model that wrote it and the parent it started from
    result           its evaluation, whether it was accepted as the new best, timings of the step (loop_s:
                     the loop's own time for this candidate), and whether the result came from the cache
    counters         ncu's digest for the kernel as written (iteration 0) or an accepted candidate; once
                     with iteration null and the reason when the run cannot collect any
    recommendations  the analyst's ranked advice (for the baseline or an accepted candidate)
    llm_error        the endpoint failed for good or a budget ran out in a call
    stop             why the loop stopped
    end              a session ended (what was written where)
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.optimize.record import RunRecord

SCHEMA = 1
TRAJECTORY_FILE = "trajectory.jsonl"
CANDIDATES_DIR = "candidates"

Listener = Callable[[dict[str, Any]], None]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Trajectory:
    """Append-only JSONL in a report directory, plus the candidates as files. Not thread-safe."""

    def __init__(self, root: Path, events: list[dict[str, Any]] | None = None):
        self.root = Path(root)
        self.path = self.root / TRAJECTORY_FILE
        self.events: list[dict[str, Any]] = []
        self.record = RunRecord()
        self.session = 1
        self.listeners: list[Listener] = []
        for event in events or []:
            self.events.append(event)
            self.record.apply(event)
        if self.events:
            self.session = max(int(e.get("session", 1)) for e in self.events) + 1

    @classmethod
    def create(cls, root: str | Path) -> Trajectory:
        """A new run in `root` (created if needed); a folder that already holds a run is refused."""
        root = Path(root)
        if (root / TRAJECTORY_FILE).exists():
            raise KforgeError("this report folder already holds a run", path=root,
                              hint="continue it with --resume, or pick another --report folder")
        try:
            (root / CANDIDATES_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KforgeError(f"cannot create the report folder: {exc.strerror or exc}", path=root) from None
        return cls(root)

    @classmethod
    def open(cls, root: str | Path) -> Trajectory:
        """An existing run, to continue it."""
        root = Path(root)
        path = root / TRAJECTORY_FILE
        if not path.is_file():
            raise KforgeError("no trajectory.jsonl here: not a kforge-bot optimize report folder", path=root,
                              hint="pass the --report folder of the run to continue")
        events = read_events(path)
        if not events or events[0].get("event") != "start":
            raise KforgeError("the trajectory does not begin with a start event", path=path,
                              hint="start a new run with --report instead of --resume")
        if events[0].get("schema") != SCHEMA:
            raise KforgeError(f"trajectory schema {events[0].get('schema')!r} is not {SCHEMA}", path=path,
                              hint="this kforge-bot cannot continue it; start a new run")
        (root / CANDIDATES_DIR).mkdir(parents=True, exist_ok=True)
        return cls(root, events)

    def append(self, event: str, *, at: float | None = None, **fields: Any) -> dict[str, Any]:
        """Write one event now (flushed and fsynced), fold it into the record, tell the listeners. `at`: when it
        happened, where that was before now (a proposer's prompt, written once its call returned)."""
        entry = {"event": event, "time": round(time.time() if at is None else at, 3), "session": self.session,
                 **fields}
        line = json.dumps(entry, default=_json_default, allow_nan=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        entry = json.loads(line)  # the record holds exactly what a replay will read
        self.events.append(entry)
        self.record.apply(entry)
        for listener in self.listeners:
            listener(entry)
        return entry

    def write_source(self, name: str, source: str) -> str:
        """Save a source under candidates/; returns its path relative to the report folder."""
        rel = f"{CANDIDATES_DIR}/{name}"
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source, encoding="utf-8")
        return rel

    def read_source(self, rel: str) -> str:
        path = self.root / rel
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise KforgeError(f"cannot read a candidate the trajectory names: {exc.strerror or exc}", path=path,
                              hint="the report folder is incomplete; start a new run") from None


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """Every event of a trajectory file. A last line cut short (the run was killed mid-write) is dropped;
    a bad line anywhere else is an error naming it."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise KforgeError(f"cannot read the trajectory: {exc}", path=path) from None
    events: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break  # cut short by a kill: everything before it stands
            raise KforgeError(f"line {number}: not a JSON object", path=path,
                              hint="the trajectory was edited or damaged; start a new run") from None
        if not isinstance(event, dict) or "event" not in event:
            raise KforgeError(f"line {number}: not a trajectory event", path=path,
                              hint="the trajectory was edited or damaged; start a new run")
        events.append(event)
    return events


def replay(path_or_dir: str | Path) -> RunRecord:
    """The record of a run from its file (or its report folder)."""
    path = Path(path_or_dir)
    if path.is_dir():
        path = path / TRAJECTORY_FILE
    record = RunRecord()
    for event in read_events(path):
        record.apply(event)
    return record


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


