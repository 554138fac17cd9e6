"""Only the side being timed runs (evaluate.turns): while one side's worker takes a timed sample, every process of
the other side is stopped, the sandbox's whole pid namespace included, and nothing is left stopped after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fakes.gate_repos import tiny_spec_in, write
from kforge_bot.evaluate import isolation, pair_driver
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.turns import Turns, descendants, stop_tree
from kforge_bot.kernelspec import Implementation

# The head's helper module arms a 2 ms timer whose handler spins whenever the head's kernel has not been called for a
# while: between the head's own samples, which is while the base's are timed. Its kernel is the base's, so any speed
# it shows is the CPU it took from the base.
SPINNER = """\
import signal
import time

last_call = [time.monotonic()]


def _spin(signum, frame):
    now = time.monotonic()
    if now - last_call[0] > 0.001:
        while time.monotonic() - now < 0.0015:
            pass


signal.signal(signal.SIGALRM, _spin)
signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
"""
HEAD = """\
import spinner


def kernel(x, y):
    spinner.last_call[0] = spinner.time.monotonic()
    return x * 2.0 + y
"""
BASE = "def kernel(x, y):\n    return x * 2.0 + y\n"


def _cpu_ns(root: int) -> int:
    """CPU time of every thread of `root` and its descendants (nanoseconds, /proc/<pid>/task/<tid>/schedstat)."""
    total = 0
    for pid in descendants(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                    total += int(stat.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total


def test_scripted_the_heads_worker_is_stopped_during_every_one_of_the_bases_samples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bot's side of the next test, in the fast lane: a scripted head's process is stopped (state T) whenever
    the base is asked for a sample, and the evaluation still ends (nothing left stopped to wait on)."""
    from fakes.workers import FakeWorkers

    spec = tiny_spec_in(tmp_path)
    sides: dict[str, pair_driver.RemoteSide] = {}
    states: list[str] = []  # the head's process state at each of the base's timed samples
    original_init, original_ask = pair_driver.RemoteSide.__init__, pair_driver.RemoteSide.ask

    def init(self: pair_driver.RemoteSide, name: str, *args: Any) -> None:
        original_init(self, name, *args)
        sides[name] = self

    def ask(self: pair_driver.RemoteSide, op: str, **args: Any) -> Any:
        if self.name == "baseline" and op == "sample":
            states.append(_state(sides["candidate"].worker.proc.pid))
        return original_ask(self, op, **args)

    monkeypatch.setattr(pair_driver.RemoteSide, "__init__", init)
    monkeypatch.setattr(pair_driver.RemoteSide, "ask", ask)
    b = spec.baseline
    head = Implementation(f"{b.source}# the head, written differently\n", b.symbol, b.filename, b.root, b.paths)
    with FakeWorkers().installed() as fake:
        result = evaluate(spec, head, "cpu", EvalSettings(seeds=1, timing_budget_s=0.5, profile=False), baseline=b)
    # Base and head in workers of their own (the base's role says so where the sandbox is on).
    assert fake.started.get("candidate", 0) + fake.started.get("baseline", 0) == 2, fake.started
    assert result.verdict in ("pass", "inconclusive"), result.reason
    assert len(states) >= 5 and set(states) == {"T"}, states


# Real workers (seconds to start, then a 2 s budget): the scripted test above keeps the bot's side in the fast lane.
@pytest.mark.slow
def test_the_heads_timer_handler_gets_no_cpu_while_the_bases_samples_run(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tiny_spec_in(tmp_path)
    head_folder = tmp_path / "head"
    write(head_folder, "spinner.py", SPINNER)
    write(head_folder, "k.py", HEAD)
    head = Implementation(HEAD, "kernel", "k.py", str(head_folder))
    base = Implementation(BASE, "kernel", "k.py", spec.root)
    sides: dict[str, pair_driver.RemoteSide] = {}
    stolen: list[int] = []  # the head's CPU nanoseconds during each of the base's timed samples
    original_init, original_ask = pair_driver.RemoteSide.__init__, pair_driver.RemoteSide.ask

    def init(self: pair_driver.RemoteSide, name: str, *args: Any) -> None:
        original_init(self, name, *args)
        sides[name] = self

    def ask(self: pair_driver.RemoteSide, op: str, **args: Any) -> Any:
        if self.name != "baseline" or op != "sample":
            return original_ask(self, op, **args)
        head_pid = sides["candidate"].worker.proc.pid
        before = _cpu_ns(head_pid)
        try:
            return original_ask(self, op, **args)
        finally:
            stolen.append(_cpu_ns(head_pid) - before)

    monkeypatch.setattr(pair_driver.RemoteSide, "__init__", init)
    monkeypatch.setattr(pair_driver.RemoteSide, "ask", ask)
    result = evaluate(spec, head, "cpu", EvalSettings(seeds=1, timing_budget_s=2.0, profile=False), baseline=base)
    assert result.verdict in ("pass", "inconclusive"), result.reason
    assert len(stolen) >= 5, stolen
    # Stopped while the base samples: not one nanosecond (the handler spun through them before, tens of ms in all).
    assert sum(stolen) == 0, (f"the head ran {sum(stolen) / 1e6:.1f} ms during {len(stolen)} base samples "
                              f"(speedup {result.speedup})")


ESCAPES = """\
import os, time
if os.fork() == 0:
    os.setsid()  # out of the worker's process group and session
    if os.fork() == 0:  # and orphaned: re-parented to the sandbox's init
        while True:
            pass
    os._exit(0)
os.wait()
while True:
    time.sleep(1)
"""


@pytest.mark.skipif(not isolation.probe().available, reason="needs bubblewrap")
def test_a_process_that_left_its_group_in_the_sandbox_is_stopped_and_everything_continues_after(
        tmp_path: Path) -> None:
    view = isolation.View(scratch=tmp_path)
    proc = subprocess.Popen(isolation.command([sys.executable, "-c", ESCAPES], view), start_new_session=True)
    try:
        tree = _settled(proc.pid, 4)  # bwrap, its init, python, the spinner (its parent gone)
        assert len(tree) == 4, tree
        groups = {os.getpgid(pid) for pid in tree}
        assert len(groups) >= 3, groups  # bwrap's, the sandbox's, the escaped spinner's own
        turns = Turns({"other": proc, "me": subprocess.Popen(["sleep", "30"])})
        turns.give("me")
        assert all(_state(pid) == "T" for pid in tree), {pid: _state(pid) for pid in tree}
        spinning = max(tree, key=_cpu_ns)
        before = _cpu_ns(spinning)
        time.sleep(0.3)
        assert _cpu_ns(spinning) == before
        turns.release()
        turns.release()  # twice is harmless
        assert all(_state(pid) != "T" for pid in tree), {pid: _state(pid) for pid in tree}
        turns.procs["me"].kill()
        turns.procs["me"].wait()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_reaped_worker_is_never_signalled(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    turns = Turns({"gone": gone, "me": subprocess.Popen(["sleep", "30"])})
    turns.give("me")  # the reaped worker's pid may be anyone's by now: it is left alone
    assert turns.stopped == set()
    assert stop_tree(os.getpid() + 10**7) == []  # no such process: nothing to stop
    turns.procs["me"].kill()
    turns.procs["me"].wait()


def _settled(root: int, count: int) -> list[int]:
    """The tree under `root` once it has `count` processes, the same pids twice 0.3 s apart (or after 20 s)."""
    deadline = time.monotonic() + 20
    previous: list[int] = []
    while time.monotonic() < deadline:
        tree = sorted(descendants(root))
        if len(tree) == count and tree == previous:
            return tree
        previous = tree
        time.sleep(0.3)
    return previous


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    return text[text.rindex(")") + 2:][:1]


# A bot that holds a stopped side and is then killed outright (SIGKILL: nothing of its own runs after): its
# worker's pid list goes to stdout, then it kills itself.
KILLED_BOT = """\
import json, os, signal, subprocess, sys, time
from pathlib import Path
from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.sandbox import start_worker
from kforge_bot.evaluate.turns import Turns, descendants

work = Path(sys.argv[1])
view = isolation.View(scratch=work) if sys.argv[2] == "sandboxed" else None
worker = start_worker(work, "candidate", view=view)
want = 3 if view is not None else 1  # bwrap, the sandbox's init and the worker; or the worker alone
tree, deadline = [], time.monotonic() + 60
while time.monotonic() < deadline and not (len(tree) >= want and tree == sorted(descendants(worker.proc.pid))):
    tree = sorted(descendants(worker.proc.pid))
    time.sleep(0.5)
# its own output: holding the bot's pipes, it would keep the test waiting on them for its whole 60 s
other = subprocess.Popen(["sleep", "60"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
turns = Turns({"worker": worker.proc, "other": other})
turns.give("other")  # the worker's whole tree stopped, as the idle side is during a timed sample
states = {}
for pid in descendants(worker.proc.pid):
    with open(f"/proc/{pid}/stat") as stat:
        states[pid] = stat.read().rsplit(")", 1)[1].split()[0]
print(json.dumps({"states": states, "other": other.pid}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sandboxed", "unsandboxed"])
def test_a_side_stopped_when_the_bot_is_killed_outright_does_not_outlive_it(tmp_path: Path, mode: str) -> None:
    if mode == "sandboxed" and not isolation.probe().available:
        pytest.skip("needs bubblewrap")
    bot = subprocess.run([sys.executable, "-c", KILLED_BOT, str(tmp_path), mode], capture_output=True, text=True,
                         timeout=120)
    assert bot.returncode == -signal.SIGKILL, bot.stderr[-2000:]
    seen = json.loads(bot.stdout)
    os.kill(seen["other"], signal.SIGKILL)
    tree = [int(pid) for pid in seen["states"]]
    assert len(tree) >= (3 if mode == "sandboxed" else 1) and set(seen["states"].values()) == {"T"}, seen
    deadline = time.monotonic() + 15
    left = tree
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [pid for pid in tree if _alive(pid)]
    for pid in left:  # never left behind by the test itself
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{mode}: the stopped worker outlived the killed bot: {left}"


def _alive(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has)."""
    try:
        return _state(pid) != "Z"
    except OSError:
        return False
