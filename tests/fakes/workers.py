"""A scripted stand-in for the sandboxed workers, at the seam where the bot starts them (evaluate.sandbox.starter).

It answers the wire protocol as a worker does: the reference's result with its Fit and one output file per case,
the candidate's outputs (files with the digests its result names) and timing, and in a split evaluation each side's
timing sessions (open, warm_up, sample, close) for the parent to drive (evaluate.pair_driver). What it answers comes
from a script per implementation, not from running it: no torch process starts, no candidate code runs. Everything
on the bot's side of the wire is the real thing: the plan, the reference store, the pair driver, the judge, the
gate's decision, the reports. The harness itself (the sandbox, the worker's checks, timing) is tested on real
workers, in tests marked `slow`.

A script is found by the implementation's symbol (`FakeWorkers(scripts={"kernel": Script(ms=2.0)})`), else in its
source, on a line `# fake-worker: ms=20 wrong` (keys: ms, wrong, error, crash, reference_error, per), else the
default.
"""

from __future__ import annotations

import hashlib
import os
import queue
import random
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot.evaluate import sandbox
from kforge_bot.evaluate.wire.plan import Fit, Plan
from kforge_bot.evaluate.sandbox import WorkerOutcome
from kforge_bot.kernelspec import Implementation

DIRECTIVE = "# fake-worker:"
SAMPLE_SPREAD = 0.01  # each timed sample's relative scatter: tight enough for a decision in few pairs


@dataclass(frozen=True)
class Script:
    """What one implementation does in a fake worker."""

    ms: float = 1.0  # every timed call
    wrong: bool = False  # its outputs differ from the reference's
    error: str = ""  # its worker reports this failure (an import, a call) instead of a result
    crash: bool = False  # its worker dies without a word (as a segfault does)
    reference_error: str = ""  # as the reference: its worker reports this failure
    per: str = ""  # `ms` is divided by this integer of the source (`CHUNK = 128`): a tunable that pays off

    def timed_in(self, source: str) -> Script:
        """This script with `per`'s value in `source` applied."""
        found = re.search(rf"^{re.escape(self.per)}\s*=\s*(\d+)", source, re.M) if self.per else None
        return replace(self, ms=self.ms / max(int(found.group(1)), 1), per="") if found else self

    @classmethod
    def from_source(cls, source: str) -> Script | None:
        for line in source.splitlines():
            if line.strip().startswith(DIRECTIVE):
                values: dict[str, Any] = {}
                for token in shlex.split(line.strip()[len(DIRECTIVE):]):
                    key, _, value = token.partition("=")
                    values[key] = float(value) if key == "ms" else value if key == "per" else (value or True)
                return cls(**values)
        return None


@dataclass
class FakeWorkers:
    """The stand-in, installed with `installed()`; `started` counts the workers the bot asked for, by role."""

    scripts: dict[str, Script] = field(default_factory=dict)
    default: Script = field(default_factory=Script)
    started: dict[str, int] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def script_for(self, impl: Implementation | None) -> Script:
        if impl is None:
            return self.default
        script = self.scripts.get(impl.symbol) or Script.from_source(impl.source) or self.default
        return script.timed_in(impl.source)

    def start(self, workdir: Path, role: str, env: dict[str, str] | None, view: Any, warm: str | None,
              hold_device: bool) -> FakeWorker:
        self.started[role] = self.started.get(role, 0) + 1
        return FakeWorker(self, workdir)

    @contextmanager
    def installed(self) -> Iterator[FakeWorkers]:
        previous, sandbox.starter = sandbox.starter, self.start
        try:
            yield self
        finally:
            sandbox.starter = previous


def expected_output(ref_file: str, seeds: list[int]) -> list[Any]:
    """The reference's output for one case of one evaluation (its seeds): small, and different for every case, so a
    mixed-up file shows."""
    import torch

    key = int.from_bytes(hashlib.sha256(f"{ref_file} {seeds[:1]}".encode()).digest()[:4], "little")
    return [torch.arange(8, dtype=torch.float32) + float(key % 1000)]


class FakeWorker:
    """One worker as WorkerProcess shows itself to the bot: a request, control lines, then `run` to its end. Its
    process is a sleeping stand-in in a group of its own, so the parent may kill it as it kills a worker."""

    def __init__(self, owner: FakeWorkers, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.owner, self.workdir = owner, workdir
        self.proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
        self.shared = None
        self.sandboxed = False
        self.waiting_on_parent = False
        self.request: dict[str, Any] | None = None
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._done = False

    # --------------------------------------------------------------- WorkerProcess's interface

    def release_device(self) -> None:
        pass

    def send(self, request: dict[str, Any], more: bool = False) -> None:
        assert self.request is None, "a worker process gets one request"
        self.request = request
        self.owner.requests.append(request)

    def send_last(self, line: dict[str, Any]) -> None:
        self.lines.put(line)

    def command(self, line: dict[str, Any]) -> None:
        self.lines.put(line)

    def discard(self) -> None:
        if not self._done:
            self._done = True
            self._end()

    def run(self, request: dict[str, Any] | None, timeout_s: float,
            on_message: Callable[[dict[str, Any]], None] | None = None, stall_s: float | None = None,
            scratch_limit: int | None = None) -> WorkerOutcome:
        assert not self._done, "a worker process runs one request"
        self._done = True
        if request is not None:
            self.send(request)
        assert self.request is not None, "send the request first"
        outcome = WorkerOutcome()
        started = time.monotonic()

        def say(message: dict[str, Any]) -> None:
            outcome.messages.append(message)
            outcome.built = outcome.built or message.get("phase") == "imported"
            if on_message is not None:
                on_message(message)

        try:
            answer = _Answer(self, say, timeout_s)
            outcome.returncode = answer.run()
        except _Killed:
            outcome.returncode = -9
        except _TimedOut:
            outcome.timed_out = True
            outcome.returncode = -9
        finally:
            self._end()
        outcome.wall_s = time.monotonic() - started
        return outcome

    # --------------------------------------------------------------- its life

    def killed(self) -> bool:
        return self.proc.poll() is not None

    def next_line(self, deadline: float) -> dict[str, Any]:
        while True:
            if self.killed():
                raise _Killed()
            if time.monotonic() > deadline:
                raise _TimedOut()
            try:
                return self.lines.get(timeout=0.01)
            except queue.Empty:
                continue

    def _end(self) -> None:
        sandbox.kill_group(self.proc)
        self.proc.wait()


class _Killed(Exception):
    """The parent killed the worker's process group."""


class _TimedOut(Exception):
    """The worker's time ran out waiting for the parent."""


class _Answer:
    """One request answered as the worker's role would answer it."""

    def __init__(self, worker: FakeWorker, say: Callable[[dict[str, Any]], None], timeout_s: float) -> None:
        assert worker.request is not None
        self.worker, self.say = worker, say
        self.deadline = time.monotonic() + timeout_s
        self.plan = Plan.from_dict(worker.request)
        self.scripts = worker.owner

    def run(self) -> int:
        if self.plan.role == "reference":
            return self.reference()
        if self.plan.role == "imports":
            return self.imports()
        return self.candidate()

    def result(self, **fields: Any) -> None:
        self.say({"type": "result", "device_name": "fake device", "target_info": {"kind": "cpu"}, **fields})

    def reference(self) -> int:
        from kforge_bot.evaluate.wire import tensorfile

        script = self.scripts.script_for(self.plan.spec.reference)
        if script.reference_error:
            self.result(status="error", reason=script.reference_error)
            return 0
        fit = Fit(seeds=0, rotate_sets=0, device_outputs=False, heldout=())
        for case in self.plan.fitted(fit).all_cases():
            self.say({"type": "progress", "phase": "reference", "case": case.label, "output_bytes": 32})
            tensorfile.write(expected_output(case.ref_file, self.plan.seeds), self.plan.out_dir / case.ref_file,
                             digest=False)
        self.result(status="ok", fit=fit.to_dict(), input_bytes=[0] * len(self.plan.spec.shape_sets),
                    output_bytes=[32] * len(self.plan.spec.shape_sets), slowest_case_s=0.001, phases={})
        return 0

    def imports(self) -> int:
        problems = [self.scripts.script_for(s.baseline).error or None for s in [self.plan.spec, *self.plan.also]]
        first = next((p for p in problems if p), None)
        self.result(status="ok" if first is None else "error", reason=first, imports=problems)
        return 0

    def candidate(self) -> int:
        fit = Fit.from_dict(self.worker.next_line(self.deadline))
        plan = self.plan.fitted(fit)
        # A side's worker holds one implementation, its candidate (its baseline is then the reference); the one
        # worker of an unsplit evaluation holds both.
        head = self.scripts.script_for(plan.candidate)
        base = head if plan.side else self.scripts.script_for(plan.baseline)
        if not plan.side and (base.crash or base.error):
            return self.fail(base, "baseline")
        self.say({"type": "progress", "phase": "baseline built"})
        if head.crash or head.error:
            return self.fail(head, plan.side if plan.side == "baseline" else "")
        self.say({"type": "progress", "phase": "imported"})
        saved = {} if plan.side == "baseline" else self.outputs(plan, head)
        timing = []
        for shape in plan.spec.timed_indices() if plan.settings.measure else ():
            if plan.side:
                self.serve(plan, shape, head)
                timing.append({"shape": shape})
            else:
                timing.append(self.timed_here(plan, shape, base, head))
        self.result(status="ok", profile={}, timing=timing, restored_state=[], phases={}, shared_state=[],
                    saved=saved)
        return 0

    def fail(self, script: Script, side: str) -> int:
        """An import or build failure (the worker's "compile_error"), or a death without a word."""
        if script.crash:
            return -11
        status = "crash" if side == "baseline" else "compile_error"
        self.result(status=status, reason=script.error, detail="", side=side)
        return 0

    def outputs(self, plan: Plan, script: Script) -> dict[str, str]:
        """Every case's output file, as the real worker saves them, and each one's digest."""
        from kforge_bot.evaluate.wire import tensorfile

        files = [(c.cand_file, c.ref_file) for c in plan.correctness_cases() + plan.heldout_cases()
                 + plan.timing_cases() + plan.changed_cases() + plan.moved_cases()]
        files += [(c.reuse_file, c.reuse_ref_file) for c in plan.correctness_cases()
                  if c.reuse_file and c.reuse_ref_file]
        saved = {}
        for cand_file, ref_file in files:
            values = expected_output(ref_file, plan.seeds)
            if script.wrong:
                values = [v + 1.0 for v in values]
            saved[cand_file] = tensorfile.write(values, plan.out_dir / cand_file)
        return saved

    def serve(self, plan: Plan, shape: int, script: Script) -> None:
        """One timing session driven by the parent (evaluate.sample_server's answers, scripted)."""
        noise = random.Random(f"{plan.side} {shape} {plan.seeds}")
        self.say({"type": "progress", "phase": "side", "op": "open", "session": f"{shape}:", "device": "cpu",
                  "sets": plan.settings.rotate_sets, "refresh": False})
        while True:
            request = self.worker.next_line(self.deadline)
            op = request.get("op")
            if op == "close":
                return
            if op == "warm_up":
                value: Any = {"eager": script.ms, "host_issue": script.ms}
            elif op == "sample":
                value = {"ms": _sample(script.ms, noise) * int(request.get("k") or 1), "busy_after_ms": 0.0,
                         "busy_before_ms": 0.0, "reading": _READING}
            else:
                value = None
            self.say({"type": "progress", "phase": "side", "op": op, "value": value})

    def timed_here(self, plan: Plan, shape: int, base: Script, head: Script) -> dict[str, Any]:
        """One shape set timed inside one worker, as measure_pair reports it."""
        noise = random.Random(f"{shape} {plan.seeds}")
        pairs = max(plan.settings.min_pairs, 10)
        return {"shape": shape, "baseline_ms": [_sample(base.ms, noise) for _ in range(pairs)],
                "candidate_ms": [_sample(head.ms, noise) for _ in range(pairs)], "calls_per_sample": 1,
                "mode": "eager", "mode_note": "", "stop_reason": f"{pairs} pairs (scripted)",
                "busy_after_ms": {"baseline": 0.0, "candidate": 0.0},
                "busy_before_ms": {"baseline": 0.0, "candidate": 0.0},
                "per_call_ms": {name: {"eager": s.ms, "device": s.ms, "host_issue": s.ms}
                                for name, s in (("baseline", base), ("candidate", head))},
                "conditions": {}, "wall_s": 0.0}


_READING = {"wall_ms": 1.0, "cpu_ms": 1.0, "involuntary_switches": 0, "runnable": 1, "threads": 1}


def _sample(ms: float, noise: random.Random) -> float:
    return ms * (1.0 + SAMPLE_SPREAD * noise.uniform(-1.0, 1.0))




def refuse_real_workers(sandbox_module: Any) -> None:
    """Start no real worker from now on: each one asked for appends the running test's id (PYTEST_CURRENT_TEST, which
    child processes inherit) to the file KFORGE_TEST_WORKER_LOG names, and is refused. With it, one quick run of
    `-m "not slow"` lists every test that would start a real worker, in the suite's process or in a command's."""

    def refused(self: Any, *args: Any, **kwargs: Any) -> None:
        with open(os.environ["KFORGE_TEST_WORKER_LOG"], "a") as log:
            log.write(os.environ.get("PYTEST_CURRENT_TEST", "(outside a test)") + "\n")
        raise RuntimeError("a real worker was asked for (KFORGE_TEST_WORKER_LOG is set)")

    sandbox_module.WorkerProcess.__init__ = refused
