"""The conditions of every timed sample (evaluate.wire.conditions): what they say, and a disturbance scripted to hit one
side's samples only, which interleaving cannot cancel."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kforge_bot.evaluate.wire import conditions, timing
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, load_spec
from kforge_bot.targets.cpu import CpuTarget

ADV = Path(__file__).parents[1] / "data" / "adversarial"
pytestmark = pytest.mark.disturbance


def side(preempted: float, crowded: float = 0.0, **more: Any) -> dict[str, Any]:
    return {"samples": 40, "preempted_share": preempted, "crowded_share": crowded, "cores": 2, **more}


def test_conditions_within_the_limits_are_no_disturbance() -> None:
    assert conditions.disturbance({"baseline": side(0.05), "candidate": side(0.1)}) is None
    assert conditions.disturbance({"baseline": {}, "candidate": side(1.0)}) is None  # nothing measured: no claim


def test_each_limit_names_what_disturbed_the_timing() -> None:
    one_sided = conditions.disturbance({"baseline": side(0.6), "candidate": side(0.05)})
    assert one_sided == ("the baseline's samples were preempted far more often than the candidate's (60% against 5%): "
                         "load hit one side harder")
    both = conditions.disturbance({"baseline": side(0.9), "candidate": side(0.85)})
    assert both == "90% of one side's samples were preempted by other work (limit 75%)"
    crowded = conditions.disturbance({"baseline": side(0.0, 0.8), "candidate": side(0.0, 0.7)})
    assert crowded == "the machine had more runnable tasks than its 2 cores during 80% of the samples (limit 50%)"
    waited = conditions.disturbance({"baseline": side(0.0), "candidate": side(0.0, wait_share=0.2)})
    assert waited == ("the candidate's threads waited for a core 20% of the time they were ready to run (limit 15%): "
                      "other work took the machine's 2 cores")
    throttled = conditions.disturbance({"baseline": side(0.0, throttled_share=0.5), "candidate": side(0.0)})
    assert throttled == "the GPU throttled its clocks during 50% of one side's samples"
    # The policy's limits replace the defaults (1.0 switches a rule off).
    loose = conditions.policy_limits(preempted_share=1.0, preempted_gap=1.0, crowded_share=1.0, wait_share=1.0)
    assert conditions.disturbance({"baseline": side(0.9, 0.9, wait_share=0.9), "candidate": side(0.1, 0.9)},
                                  loose) is None


def test_a_summary_says_how_many_threads_were_busy_and_how_crowded_the_machine_was() -> None:
    readings = [{"wall_ms": 10.0, "cpu_ms": 19.0, "involuntary_switches": 1, "runnable": 4, "threads": 3},
                {"wall_ms": 10.0, "cpu_ms": 20.0, "involuntary_switches": 0, "runnable": 1, "threads": 3}]
    summary = conditions.summarize(readings)
    assert summary["busy_threads"] == 2.0 and summary["threads"] == 3
    assert summary["preempted_share"] == 0.5 and summary["involuntary_switches"] == 1
    assert summary["crowded_share"] == (0.5 if conditions.CORES < 4 else 0.0)


def test_a_sides_wait_for_a_core_is_its_share_of_the_time_its_threads_were_ready_to_run() -> None:
    readings = [{"wall_ms": 10.0, "cpu_ms": 15.0, "wait_ms": 5.0}, {"wall_ms": 10.0, "cpu_ms": 20.0, "wait_ms": 0.0}]
    assert conditions.summarize(readings)["wait_share"] == 0.125
    assert "wait_share" not in conditions.summarize([{"wall_ms": 10.0, "cpu_ms": 15.0}])  # a GPU target's: unread


def test_a_sample_beside_a_process_that_holds_the_core_counts_the_wait(one_core: int) -> None:
    """The disturbance no other rule saw on a 2-core VM: work beside the worker that never crowds the machine but
    takes a share of its cores (benchmarks/results/disturbed_timing_cpu.md). Here a process spins on the worker's
    own core; the scheduler shares the core, and the sample's threads wait for it about as long as they run."""
    if conditions.RunQueueWait().seconds() == 0.0:
        pytest.skip("this kernel keeps no run-queue delay (/proc/<tid>/schedstat)")
    hog = subprocess.Popen([sys.executable, "-c", f"import os, time; os.sched_setaffinity(0, {{{one_core}}})\n"
                            "end = time.time() + 20\nwhile time.time() < end: pass"])
    try:
        time.sleep(0.5)  # spinning by now
        gauge = conditions.Gauge(waits=True)
        gauge.begin()
        _spin(0.3)
        shared = gauge.take()
    finally:
        hog.kill()
        hog.wait()
    assert shared["wait_ms"] > 0.3 * shared["cpu_ms"], shared
    summary = conditions.summarize([shared])
    assert summary["wait_share"] > conditions.WAIT_SHARE
    only_waits = conditions.policy_limits(preempted_share=1.0, preempted_gap=1.0, crowded_share=1.0)
    why = conditions.disturbance({"baseline": summary, "candidate": summary}, only_waits)
    assert why is not None and "waited for a core" in why, why


def test_the_wait_reader_keeps_one_file_per_live_thread_and_closes_those_of_ended_ones() -> None:
    reader = conditions.RunQueueWait()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    reader.seconds()
    opened = len(os.listdir("/proc/self/fd"))
    stop.set()
    thread.join()
    # join returns when the thread has run its last code; the kernel lists its task a moment longer
    deadline = time.monotonic() + 5
    while str(thread.native_id) in os.listdir("/proc/self/task") and time.monotonic() < deadline:
        time.sleep(0.01)
    reader.seconds()
    assert len(os.listdir("/proc/self/fd")) == opened - 1
    reader.close()
    assert not [fd for fd in os.listdir("/proc/self/fd") if _links_to_schedstat(fd)]


def _links_to_schedstat(fd: str) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").endswith("/schedstat")
    except OSError:
        return False


def test_processes_started_by_this_one_are_found_and_gone_once_ended() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert any(entry.startswith(f"{child.pid} ") for entry in conditions.others_alive())
    finally:
        child.kill()
        child.wait()
    assert not any(entry.startswith(f"{child.pid} ") for entry in conditions.others_alive())


def _disturber(go: Any, core: int) -> None:
    os.sched_setaffinity(0, {core})
    while True:
        go.recv_bytes()  # blocked, not polling, while not asked: no wake-ups beside the candidate
        end = time.perf_counter() + 0.004
        while time.perf_counter() < end:
            pass


@pytest.fixture()
def one_core() -> Iterator[int]:
    """This process on one core of its own choosing, put back afterwards."""
    before = os.sched_getaffinity(0)
    core = min(before)
    os.sched_setaffinity(0, {core})
    try:
        yield core
    finally:
        os.sched_setaffinity(0, before)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_busy_process_during_the_baseline_s_samples_only_is_a_disturbance(one_core: int) -> None:
    """The scripted disturbance: a process on the worker's core that spins only while the baseline runs. The pairs
    stay interleaved, so only the conditions can show it."""
    receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
    disturber = multiprocessing.get_context("fork").Process(target=_disturber, args=(receive, one_core), daemon=True)
    disturber.start()

    def baseline(inputs: list[Any]) -> list[Any]:
        send.send_bytes(b"go")
        _spin(0.004)
        return []

    def candidate(inputs: list[Any]) -> list[Any]:
        _spin(0.004)
        return []

    try:
        times = timing.measure_pair(CpuTarget(), baseline, candidate, [[1], [2], [3]], timing_budget_s=2.0,
                                    target_precision=0.001, min_pairs=10, max_pairs=30, confidence=0.95, warmup_ms=5,
                                    after_baseline=lambda out, i: None, after_candidate=lambda out, i: None)
    finally:
        disturber.kill()
        disturber.join()
    b, c = times.conditions["baseline"], times.conditions["candidate"]
    assert b["samples"] >= 10 and b["preempted_share"] >= 0.8, times.conditions
    why = conditions.disturbance(times.conditions)
    assert why is not None
    if c["preempted_share"] < 0.5:  # the rest of the machine left the candidate's samples alone: one side named
        assert why.startswith("the baseline's samples were preempted far more often"), why


@pytest.mark.slow
def test_beside_a_busy_loop_on_the_worker_s_core_the_verdict_is_inconclusive(one_core: int) -> None:
    """End to end: the workers inherit this process's one core, which a busy loop shares. On main this read as a
    confident speedup."""
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(loop.pid, {one_core})
        spec = load_spec(ADV / "problem.py")
        result = evaluate(spec, Implementation.from_file(ADV / "honest.py", "ModelNew"), "cpu",
                          EvalSettings(seeds=2, timing_budget_s=0.5, profile=False, timeout_s=120))
    finally:
        loop.kill()
        loop.wait()
    assert result.verdict == "inconclusive", result.reason
    assert result.reason.startswith("timing disturbed: "), result.reason
    assert result.speedup is not None  # the figures stay, for what they are worth, with the conditions beside them
    shown = result.details["conditions"]
    assert shown["disturbed"] and "threads busy" in shown["threads"]


@pytest.mark.slow
def test_the_policy_s_cpu_threads_pin_torch_and_openmp_in_the_workers_and_the_result_says_the_threads() -> None:
    spec = load_spec(ADV / "problem.py")
    candidate = Implementation.from_file(Path(__file__).parents[1] / "data" / "steering" / "threads_seen.py",
                                         "ModelNew")
    pinned = evaluate(spec, candidate, "cpu", EvalSettings(seeds=2, timing_budget_s=0.3, profile=False, timeout_s=120,
                                                            cpu_threads=1, max_preempted_share=1.0,
                                                            max_preempted_gap=1.0, max_crowded_share=1.0,
                                                            max_wait_share=1.0))
    assert pinned.verdict == "pass", pinned.reason
    assert "threads busy" in pinned.details["conditions"]["threads"]
    sides = pinned.details["conditions"]["per_shape"][0]
    assert sides["baseline"]["busy_threads"] <= 1.3 and sides["candidate"]["busy_threads"] <= 1.3
    if (os.cpu_count() or 1) > 1:  # unpinned, torch takes every core: the candidate sees more than one thread
        free = evaluate(spec, candidate, "cpu", EvalSettings(seeds=2, measure=False, profile=False, timeout_s=120))
        assert free.verdict == "crash" and "threads (" in free.reason, free.reason
