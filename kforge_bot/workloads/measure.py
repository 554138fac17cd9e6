"""Base against head, end to end: each side in its own fresh sandboxed process (kforge_bot.workloads.worker),
alternating in pairs (base first, then head first), until the interval of the paired ratio is as narrow as the
policy asks, the pairs run out or the budget ends. Warm-ups and compilation run untimed in each process and are
reported. The statistics are the harness's (kforge_bot.evaluate.stats): the median of the per-pair ratios
base/head and its distribution-free interval."""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kforge_bot.environment import scrubbed_environment
from kforge_bot.evaluate import bytecode, isolation
from kforge_bot.evaluate.limits import limits_for
from kforge_bot.evaluate.result import EvalSettings
from kforge_bot.evaluate.sandbox import (WorkerProcess, python_path_folders, raise_on_sandbox_failure,
                                         remove_scratch, scratch_root)
from kforge_bot.evaluate.stats import relative_half_width, speedup_from_pairs
from kforge_bot.targets import target_kind
from kforge_bot.workloads.compare import mismatch
from kforge_bot.workloads.spec import WorkloadSpec

Log = Callable[[str], None]


class WorkloadProcess(WorkerProcess):
    entry_module = "kforge_bot.workloads.worker"


@dataclass(frozen=True)
class Side:
    """One side of the comparison: the program's spec (always the base's in the gate), the modules taken from
    another checkout (module -> file: the head's kernels), and the folders its process may read."""

    label: str
    spec: WorkloadSpec
    overlay: dict[str, str] = field(default_factory=dict)
    readable: tuple[str, ...] = ()
    args: dict[str, Any] | None = None  # replaces the spec's args (a benchmark's eager against Triton)


@dataclass(frozen=True)
class Budget:
    """How hard to look: the interval's confidence and relative half-width to stop at, the pairs and seconds."""

    confidence: float = 0.95
    precision: float = 0.005
    min_pairs: int = 6
    max_pairs: int = 40
    budget_s: float = 300.0


@dataclass
class Run:
    """One process's run of the workload."""

    ok: bool
    median_ms: float = math.nan
    times_ms: list[float] = field(default_factory=list)
    warmup_ms: list[float] = field(default_factory=list)
    output: dict[str, Any] | None = None
    error: str = ""
    wall_s: float = 0.0
    setup_s: float = 0.0


@dataclass
class WorkloadMeasurement:
    """What the pairs gave: per pair the base's and the head's median time, the paired ratio's median (speedup =
    base/head: below 1 the head is slower) and interval, and the A/A noise floor of this runner."""

    status: str  # ok | incorrect | error
    reason: str = ""
    base_ms: list[float] = field(default_factory=list)
    head_ms: list[float] = field(default_factory=list)
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    half_width: float | None = None
    noise_floor: float | None = None  # median |b_i/b_(i+1) - 1| over successive base processes
    stop: str = ""
    warmup_ms: dict[str, list[float]] = field(default_factory=dict)  # the first process's of each side
    setup_s: dict[str, float] = field(default_factory=dict)  # building the inputs (the model), untimed, likewise
    wall_s: float = 0.0

    @property
    def pairs(self) -> int:
        return len(self.head_ms)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "pairs": self.pairs,
                "base_ms": [round(t, 4) for t in self.base_ms], "head_ms": [round(t, 4) for t in self.head_ms],
                "speedup": self.speedup, "speedup_ci": list(self.speedup_ci) if self.speedup_ci else None,
                "half_width": self.half_width, "noise_floor": self.noise_floor, "stop": self.stop,
                "warmup_ms": self.warmup_ms, "setup_s": self.setup_s, "wall_s": round(self.wall_s, 3)}


def run_side(side: Side, kind: str, settings: EvalSettings, process: WorkloadProcess | None = None) -> Run:
    """The workload once, in a fresh process (or `process`, started ahead by `start_process`)."""
    started = time.monotonic()
    process, work = process or start_process(side, kind, settings)
    spec = side.spec
    request = {"device": kind, "paths": spec.sys_paths, "overlay": side.overlay, "module": spec.module,
               "entry": spec.entry, "inputs_module": spec.inputs_module, "inputs_symbol": spec.inputs_symbol,
               "args": spec.args if side.args is None else side.args, "seed": spec.seed, "warmup": spec.warmup,
               "repeats": spec.repeats, "threads": 1 if kind == "cpu" else None,
               "limits": limits_for(settings, kind, process.sandboxed, str(scratch_root())).to_dict()}
    try:
        outcome = process.run(request, settings.timeout_s)
        raise_on_sandbox_failure(outcome)
    finally:
        remove_scratch(work)
    result = outcome.result or {}
    wall = time.monotonic() - started
    if result.get("status") != "ok":
        reason = result.get("reason") or (f"timed out after {settings.timeout_s:g} s" if outcome.timed_out
                                          else f"its process {outcome.exit_description()}")
        return Run(False, error=str(reason)[:500], wall_s=wall)
    times = [float(t) for t in result["times_ms"]]
    return Run(True, statistics.median(times), times, [float(t) for t in result["warmup_ms"]], result.get("output"),
               wall_s=wall, setup_s=float(result.get("setup_s", 0.0)))


def start_process(side: Side, kind: str, settings: EvalSettings) -> tuple[WorkloadProcess, Path]:
    """A fresh process for one side, booting (the interpreter, torch) until its request comes."""
    work = Path(tempfile.mkdtemp(prefix="kforge-workload-", dir=scratch_root()))
    view = None
    if isolation.resolve_isolation(settings.isolation):
        readable = {Path(p) for p in (side.spec.root, *side.spec.sys_paths, *side.readable)} | python_path_folders()
        view = isolation.View(scratch=work, readable=tuple(sorted(readable)), devices=target_kind(kind),
                              bytecode=bytecode.for_workers(scrubbed_environment()).directory)
    return WorkloadProcess(work, "workload", view=view), work


def measure(base: Side, head: Side, kind: str, settings: EvalSettings, budget: Budget,
            log: Log | None = None, judge_outputs: bool = True) -> WorkloadMeasurement:
    """Pairs of fresh processes, base and head alternating who goes first, until the interval of the paired
    ratio is `budget.precision` wide on each side, or `max_pairs`, or `budget_s`. The head's output is compared
    with the base's in the first pair; a mismatch ends the measurement (`incorrect`). Off the CPU, the next
    process boots while the current one runs (it touches no device before its request). `judge_outputs` False
    (two implementations that round differently, timed against each other): a mismatch is noted, not a verdict."""
    say = log or (lambda _msg: None)
    started = time.monotonic()
    m = WorkloadMeasurement(status="ok")
    spare: tuple[WorkloadProcess, Path] | None = None
    order = [base, head]

    def finish(status: str, reason: str | None = None) -> WorkloadMeasurement:
        if spare is not None:
            spare[0].discard()
            remove_scratch(spare[1])
        m.status, m.wall_s = status, time.monotonic() - started
        m.reason = m.reason if reason is None else reason
        return m

    while True:
        runs: dict[str, Run] = {}
        for i, side in enumerate(order):
            process = spare
            # Next comes the other side of this pair, or (pairs alternate who goes first) this one again.
            spare = start_process(order[1], kind, settings) if kind != "cpu" else None
            runs[side.label] = run_side(side, kind, settings, process)
            if not runs[side.label].ok:
                whose = "the base" if side is base else "the head"
                return finish("error", f"{whose} failed: {runs[side.label].error}")
        b, h = runs[base.label], runs[head.label]
        if not m.head_ms:
            m.warmup_ms = {"base": [round(t, 3) for t in b.warmup_ms], "head": [round(t, 3) for t in h.warmup_ms]}
            m.setup_s = {"base": b.setup_s, "head": h.setup_s}
            wrong = mismatch(b.output or {}, h.output or {}, base.spec.compare) if b.output and h.output else \
                "no output came back to compare"
            if wrong and judge_outputs:
                return finish("incorrect", wrong)
            m.reason = f"outputs differ, not judged: {wrong}" if wrong else ""
        m.base_ms.append(b.median_ms)
        m.head_ms.append(h.median_ms)
        order.reverse()
        elapsed = time.monotonic() - started
        say(f"pair {m.pairs}: base {b.median_ms:.3f} ms, head {h.median_ms:.3f} ms")
        _summarize(m, budget.confidence)
        stop = ""
        if m.pairs >= budget.min_pairs and m.half_width is not None and m.half_width <= budget.precision:
            stop = f"interval within {budget.precision:.2%}"
        elif m.pairs >= budget.max_pairs:
            stop = f"{budget.max_pairs} pairs"
        elif elapsed + elapsed / m.pairs > budget.budget_s:
            stop = f"budget of {budget.budget_s:g} s"
        if stop:
            m.stop = stop
            return finish("ok")


def _summarize(m: WorkloadMeasurement, confidence: float) -> None:
    speedup, ci = speedup_from_pairs(m.base_ms, m.head_ms, confidence)
    m.speedup = speedup
    m.speedup_ci = ci if math.isfinite(ci[0]) and math.isfinite(ci[1]) else None
    m.half_width = relative_half_width(ci, speedup) if m.speedup_ci else None
    successive = [abs(a / b - 1.0) for a, b in zip(m.base_ms, m.base_ms[1:]) if b > 0]
    m.noise_floor = statistics.median(successive) if successive else None

