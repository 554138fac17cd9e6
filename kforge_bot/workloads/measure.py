"""Base against head, end to end, in rounds (`budget.processes`): each round a fresh pair of sandboxed processes
(kforge_bot.workloads.worker), the base's kernels in one and the head's in the other, started together and warmed
up (compilation, caches: untimed, reported), then timed in samples that alternate between them in pairs (base then
head, head then base, ...). Rounds follow one another until the interval is as narrow as the policy asks, the pairs
run out or the budget ends. A sample is many calls back to back (at least `budget.sample_s` of them, the same count
on both sides and in every round), timed by the parent from its command to the process's answer, so a fresh
process's first moments and the clock's resolution fall outside the figure.

Why rounds: one process can run the same code persistently faster or slower than another (on an H100 two processes
of one program, timed in 38 pairs, differed by 18% with an interval of +-7%: benchmarks/results/workloads_h100.md).
Pairs within one pair of processes cannot see that, so the interval is over the rounds: each one's median per-pair
ratio base/head, and a Student t interval of their logarithms (kforge_bot.evaluate.wire.stats). One round after
another keeps two processes alive at a time (a model's memory twice). With one round it is the median of the
per-pair ratios and its distribution-free interval, blind to a process's own speed."""

from __future__ import annotations

import math
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kforge_bot.environment import scrubbed_environment
from kforge_bot.evaluate import bytecode, isolation
from kforge_bot.evaluate.wire.limits import limits_for
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.sandbox import WorkerProcess, kill_group, python_path_folders, raise_on_sandbox_failure
from kforge_bot.evaluate.scratch import remove_scratch, scratch_root
from kforge_bot.evaluate.wire.stats import ratio_of_processes, relative_half_width, speedup_from_pairs
from kforge_bot.targets import target_kind
from kforge_bot.workloads.compare import mismatch
from kforge_bot.workloads.spec import WorkloadSpec

Log = Callable[[str], None]


class WorkloadProcess(WorkerProcess):
    entry_module = "kforge_bot.workloads.worker"

    def command(self, line: str) -> None:
        """One control line to the running worker: a sample's calls, or stop (after the request: `send`)."""
        if self._feeder is not None:
            self._feeder.join()  # the request's own write comes first
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.write((line + "\n").encode())
        stdin.flush()


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
    """How hard to look: the interval's confidence and relative half-width to stop at, the pairs and seconds, and
    how long one sample's calls run at least."""

    confidence: float = 0.95
    precision: float = 0.005
    min_pairs: int = 6
    max_pairs: int = 40
    budget_s: float = 300.0
    sample_s: float = 0.5
    processes: int = 3  # rounds, each a fresh pair of processes (a base's, a head's): the interval is over them


@dataclass
class WorkloadMeasurement:
    """What the pairs gave: per pair the base's and the head's time a call (each a sample's mean), the paired
    ratio's median (speedup = base/head: below 1 the head is slower) and interval, and this runner's noise floor."""

    status: str  # ok | incorrect | error
    reason: str = ""
    base_ms: list[float] = field(default_factory=list)
    head_ms: list[float] = field(default_factory=list)
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    half_width: float | None = None
    noise_floor: float | None = None  # median |b_i/b_(i+1) - 1| over the base's successive samples
    stop: str = ""
    calls_per_sample: int = 0
    warmup_ms: dict[str, list[float]] = field(default_factory=dict)  # each side's warm-up calls, untimed
    setup_s: dict[str, float] = field(default_factory=dict)  # building the inputs (the model), untimed
    boot_s: float = 0.0  # from the processes' start to both being warm, over every round
    wall_s: float = 0.0
    pair_process: list[int] = field(default_factory=list)  # the round (its pair of processes) of each pair of samples
    process_ratios: list[float] = field(default_factory=list)  # each round's median ratio base/head

    @property
    def pairs(self) -> int:
        return len(self.head_ms)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "pairs": self.pairs,
                "base_ms": [round(t, 4) for t in self.base_ms], "head_ms": [round(t, 4) for t in self.head_ms],
                "speedup": self.speedup, "speedup_ci": list(self.speedup_ci) if self.speedup_ci else None,
                "half_width": self.half_width, "noise_floor": self.noise_floor, "stop": self.stop,
                "calls_per_sample": self.calls_per_sample, "warmup_ms": self.warmup_ms, "setup_s": self.setup_s,
                "boot_s": round(self.boot_s, 3), "wall_s": round(self.wall_s, 3), "pair_process": self.pair_process,
                "process_ratios": [round(r, 5) for r in self.process_ratios]}


def request_for(side: Side, kind: str, settings: EvalSettings, process: WorkloadProcess) -> dict[str, Any]:
    spec = side.spec
    return {"device": kind, "paths": spec.sys_paths, "overlay": side.overlay, "module": spec.module,
            "entry": spec.entry, "inputs_module": spec.inputs_module, "inputs_symbol": spec.inputs_symbol,
            "args": spec.args if side.args is None else side.args, "seed": spec.seed, "warmup": spec.warmup,
            "threads": 1 if kind == "cpu" else None,
            "limits": limits_for(settings, kind, process.sandboxed, str(scratch_root())).to_dict()}


def start_process(side: Side, kind: str, settings: EvalSettings) -> tuple[WorkloadProcess, Path]:
    """A fresh process for one side, booting (the interpreter, torch) until its request comes."""
    work = Path(tempfile.mkdtemp(prefix="kforge-workload-", dir=scratch_root()))
    view = None
    if isolation.resolve_isolation(settings.isolation):
        readable = {Path(p) for p in (side.spec.root, *side.spec.sys_paths, *side.readable)} | python_path_folders()
        view = isolation.View(scratch=work, readable=tuple(sorted(readable)), devices=target_kind(kind),
                              bytecode=bytecode.for_workers(scrubbed_environment()).directory)
    return WorkloadProcess(work, "workload", view=view), work


class Running:
    """One side's process for the whole measurement: its run (kforge_bot.evaluate.sandbox) in a thread of its own,
    its messages in a queue, samples on command."""

    def __init__(self, side: Side, kind: str, settings: EvalSettings, life_s: float) -> None:
        self.side = side
        self.process, self.work = start_process(side, kind, settings)
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.outcome: Any = None
        self.silent = False  # a wait passed its deadline without the message
        self.process.send(request_for(side, kind, settings, self.process), more=True)
        self.thread = threading.Thread(target=self._run, args=(life_s,), daemon=True)
        self.thread.start()

    def _run(self, life_s: float) -> None:
        try:
            self.outcome = self.process.run(None, life_s, on_message=self.messages.put)
        finally:
            self.messages.put(None)

    def wait(self, kind: str, deadline: float) -> dict[str, Any] | None:
        """The next message of type `kind`; None where the process ended, failed or passed `deadline` first."""
        while True:
            try:
                message = self.messages.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                self.silent = True
                return None
            if message is None:
                self.messages.put(None)
                return None
            if message.get("type") == kind:
                return message
            if message.get("type") == "result":
                self.messages.put(message)  # a failure: kept for `failure`
                return None

    def sample(self, calls: int, timeout_s: float) -> float | None:
        """`calls` calls back to back, timed from the command to the answer: ms a call (None: no answer)."""
        started = time.perf_counter()
        try:
            self.command(json_calls(calls))
        except OSError:
            return None
        answer = self.wait("sample", time.monotonic() + timeout_s)
        return None if answer is None else (time.perf_counter() - started) * 1e3 / calls

    def command(self, line: str) -> None:
        self.process.command(line)

    def close(self) -> None:
        """Stop the process (it exits on `stop`; one that does not is killed) and remove its scratch folder."""
        try:
            self.command("stop")
        except (OSError, ValueError):
            pass
        self.thread.join(timeout=10)
        if self.thread.is_alive():
            kill_group(self.process.proc)
            self.thread.join(timeout=30)
        remove_scratch(self.work)

    def failure(self, waited_s: float) -> str:
        """Why the process gave no answer (call after `close`)."""
        outcome = self.outcome
        if outcome is None or self.silent:
            return f"gave no answer within {waited_s:g} s"
        raise_on_sandbox_failure(outcome)
        result = outcome.result or {}
        if result.get("status") == "error":
            return str(result.get("reason"))[:500]
        return f"its process {outcome.exit_description()}"


def json_calls(calls: int) -> str:
    return '{"calls": %d}' % calls


def calls_for(sample_s: float, ms_per_call: float, least: int) -> int:
    """Calls a sample runs: enough for `sample_s`, at least `least` (the workload's repeats)."""
    return max(least, min(MAX_CALLS_PER_SAMPLE, math.ceil(sample_s * 1e3 / max(ms_per_call, 1e-3))))


MAX_CALLS_PER_SAMPLE = 100_000


def measure(base: Side, head: Side, kind: str, settings: EvalSettings, budget: Budget,
            log: Log | None = None, judge_outputs: bool = True) -> WorkloadMeasurement:
    """`budget.processes` rounds, one after another, each with a fresh pair of processes (never more than two alive:
    a model's memory twice, not six times), started together and warmed up, then samples alternating in pairs (base
    first, then head first). Every round gets its share of `max_pairs` and `budget_s`; from the second round on,
    the measurement stops once the interval is `budget.precision` wide on each side (after `min_pairs`). Each
    round's first pair is untimed: it settles the interleaving (and the first round's sets the calls a sample runs:
    the slower side's for `sample_s`, the same in every round). Each round's head output (its first call's) is
    compared with its base's; a mismatch ends the measurement (`incorrect`). `judge_outputs` False (two
    implementations that round differently, timed against each other): a mismatch is noted, not a verdict."""
    say = log or (lambda _msg: None)
    started = time.monotonic()
    m = WorkloadMeasurement(status="ok")
    rounds = max(1, budget.processes)
    for k in range(rounds):
        procs = _start(base, head, kind, settings, settings.timeout_s + budget.budget_s + 60)
        try:
            done = _round(m, k, rounds, procs, base, budget, settings, started, judge_outputs, say)
        except _NoAnswer as gone:
            _close(procs)
            whose = "the base" if gone.process == 0 else "the head"
            m.status, m.reason = "error", f"{whose} failed: {procs[gone.process].failure(gone.waited_s)}"
            m.wall_s = time.monotonic() - started
            return m
        except BaseException:
            _close(procs)
            raise
        _close(procs)
        if done:
            break
    if m.status == "ok" and not m.stop:  # every round ran its share short of the pairs and the budget
        m.stop = f"{rounds} rounds"
    if m.status == "ok" and rounds > 1 and len(set(m.pair_process)) < 2:
        m.stop += "; one round only"  # and so no interval (summarize)
    m.wall_s = time.monotonic() - started
    return m


def _round(m: WorkloadMeasurement, k: int, rounds: int, procs: list[Running], base: Side, budget: Budget,
           settings: EvalSettings, started: float, judge_outputs: bool, say: Log) -> bool:
    """Round `k` on its pair of processes: warm, settle, then its pairs. True: the measurement
    ends here (an incorrect head, the interval narrow enough, or the pairs or the budget spent)."""
    round_started = time.monotonic()
    ready = [_answer(running.wait("ready", round_started + settings.timeout_s), i, settings.timeout_s)
             for i, running in enumerate(procs)]
    m.boot_s += time.monotonic() - round_started
    if k == 0:
        m.warmup_ms = {name: [round(float(t), 3) for t in r["warmup_ms"]] for name, r in zip(("base", "head"), ready)}
        m.setup_s = {name: float(r.get("setup_s", 0.0)) for name, r in zip(("base", "head"), ready)}
    outputs = [r.get("output") for r in ready]
    wrong = mismatch(outputs[0], outputs[1], base.spec.compare) if all(outputs) else "no output came back to compare"
    if wrong and judge_outputs:
        m.status, m.reason = "incorrect", wrong
        return True
    m.reason = m.reason or (f"outputs differ, not judged: {wrong}" if wrong else "")
    # The settling pair, untimed in every round; the first round's sets the calls a sample runs (its own calls from
    # the warm-up's last call: both warmed together, so a guess).
    guess = max(float(r["warmup_ms"][-1]) for r in ready)
    settle = m.calls_per_sample or calls_for(budget.sample_s, guess, base.spec.repeats)
    times = [_answer(running.sample(settle, settings.timeout_s), i, settings.timeout_s)
             for i, running in enumerate(procs)]
    if k == 0:
        m.calls_per_sample = calls_for(budget.sample_s, max(times), base.spec.repeats)
        say(f"warm: {m.calls_per_sample} calls a sample (base {times[0]:.3f} ms, head {times[1]:.3f} ms a call)")
    last = min(budget.max_pairs, math.ceil(budget.max_pairs * (k + 1) / rounds))
    until = started + budget.budget_s * (k + 1) / rounds
    return _timed_pairs(m, k, procs, last, until, budget, settings.timeout_s, started, say)


class _NoAnswer(Exception):
    """Process `process` (0: the base's, 1: the head's) gave no answer within `waited_s`: the measurement ends in an
    error."""

    def __init__(self, process: int, waited_s: float) -> None:
        super().__init__(process, waited_s)
        self.process, self.waited_s = process, waited_s


_Answer = TypeVar("_Answer")


def _answer(answer: _Answer | None, process: int, waited_s: float) -> _Answer:
    if answer is None:
        raise _NoAnswer(process, waited_s)
    return answer


def _start(base: Side, head: Side, kind: str, settings: EvalSettings, life_s: float) -> list[Running]:
    """Both sides' processes, started together; where the second cannot start, the first is stopped."""
    procs: list[Running] = []
    try:
        for side in (base, head):
            procs.append(Running(side, kind, settings, life_s))
    except BaseException:
        _close(procs)
        raise
    return procs


def _close(procs: list[Running]) -> None:
    for running in procs:
        running.close()


def _timed_pairs(m: WorkloadMeasurement, k: int, procs: list[Running], last: int, until: float, budget: Budget,
                 timeout_s: float, started: float, say: Log) -> bool:
    """Round `k`'s timed pairs, alternating which side goes first, until the measurement has `last` pairs or the
    round's time (`until`) is up; True where the whole measurement stops (`m.stop` says why): the interval narrow
    enough (over two rounds at least, where there are several), `max_pairs`, or `budget_s`."""
    order = [0, 1]
    while True:
        pair_started = time.monotonic()
        times = [0.0, 0.0]
        for i in order:
            times[i] = _answer(procs[i].sample(m.calls_per_sample, timeout_s), i, timeout_s)
        order.reverse()
        m.base_ms.append(times[0])
        m.head_ms.append(times[1])
        m.pair_process.append(k)
        now = time.monotonic()
        say(f"pair {m.pairs} (round {k + 1}): base {times[0]:.3f} ms, head {times[1]:.3f} ms a call")
        summarize(m, budget.confidence, budget.processes)
        if m.pairs >= budget.min_pairs and m.half_width is not None and m.half_width <= budget.precision:
            m.stop = f"interval within {budget.precision:.2%}"
        elif m.pairs >= budget.max_pairs:
            m.stop = f"{budget.max_pairs} pairs"
        elif now - started + (now - pair_started) > budget.budget_s:
            m.stop = f"budget of {budget.budget_s:g} s"
        if m.stop:
            return True
        if m.pairs >= last or now + (now - pair_started) > until:
            return False


def summarize(m: WorkloadMeasurement, confidence: float, rounds: int = 1) -> None:
    """The measurement's speedup, interval and noise floor from its pairs so far (in place). Of `rounds` asked
    for, more than one and only one run yet: no interval, since one pair of processes' is blind to a process's own
    speed."""
    by_process: dict[int, tuple[list[float], list[float]]] = {}
    for k, b, h in zip(m.pair_process, m.base_ms, m.head_ms):
        by_process.setdefault(k, ([], []))[0].append(b)
        by_process[k][1].append(h)
    m.process_ratios = [speedup_from_pairs(b, h, confidence)[0] for b, h in by_process.values()]
    if len(by_process) > 1:  # the interval over the rounds: each pair of processes' own speed counts
        speedup, ci = ratio_of_processes(m.process_ratios, confidence)
    else:
        speedup, ci = speedup_from_pairs(m.base_ms, m.head_ms, confidence)
        if rounds > 1:
            ci = (-math.inf, math.inf)
    m.speedup = speedup
    m.speedup_ci = ci if math.isfinite(ci[0]) and math.isfinite(ci[1]) else None
    m.half_width = relative_half_width(ci, speedup) if m.speedup_ci else None
    successive = [abs(a / b - 1.0) for a, b in zip(m.base_ms, m.base_ms[1:]) if b > 0]
    m.noise_floor = statistics.median(successive) if successive else None
