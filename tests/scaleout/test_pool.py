"""The evaluation pool on CPU slots: real evaluations in sandboxed children, real slot processes.

Candidates that crash (SIGSEGV), hang past the timeout and kill their slot process (SIGKILL to the parent)
are reported as that candidate's verdict; the queued jobs behind them still run, on a replaced slot.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from fakes.pool_kernels import HANG, KERNEL, KILL_SLOT, PINNED, SEGFAULT, SETTINGS, spec_in, variant

from kforge_bot.errors import KforgeError
from kforge_bot.evaluate import isolation
from kforge_bot.scaleout.devices import Device
from kforge_bot.scaleout.orphans import kill_marked
from kforge_bot.scaleout.pool import EvalPool


@pytest.fixture
def spec(tmp_path: Path):
    return spec_in(tmp_path)


@pytest.mark.slow
def test_slots_survive_crash_hang_and_a_killed_slot_without_losing_the_queue(spec) -> None:
    seeds = [11, 12]
    devices = [Device("cuda", "5", "fake pinned 5"), Device("cuda", "6", "fake pinned 6")]
    with EvalPool("cpu", devices=devices, compile_ahead=False) as pool:
        jobs = {"good0": PINNED, "segfault": SEGFAULT, "kill_slot": KILL_SLOT, "hang": HANG, "good1": PINNED}
        # Inside the sandbox a candidate cannot see, let alone kill, its slot (kill_slot_boxed below): the
        # slot-replacement path is exercised with the sandbox off, as on a machine without bubblewrap.
        unboxed = replace(SETTINGS, isolation="off")
        futures = {name: pool.submit(spec, variant(spec, src, name), unboxed if name == "kill_slot" else SETTINGS,
                                     seeds) for name, src in jobs.items()}
        if isolation.probe().available:
            futures["kill_slot_boxed"] = pool.submit(spec, variant(spec, KILL_SLOT, "boxed"), SETTINGS, seeds)
        done = {name: f.result(timeout=120) for name, f in futures.items()}
        replaced = pool.replaced

    for name in ("good0", "good1"):
        assert done[name].result.verdict == "pass", (name, done[name].result.reason)
    assert done["segfault"].result.verdict == "crash"
    assert "SIGSEGV" in done["segfault"].result.reason
    assert done["hang"].result.verdict == "timeout"
    killed = done["kill_slot"].result
    assert killed.verdict == "crash" and "died (killed by SIGKILL)" in killed.reason and "replaced" in killed.reason
    assert replaced == 1
    if "kill_slot_boxed" in done:
        assert done["kill_slot_boxed"].result.verdict == "timeout"  # its kill reached nothing; it slept on
    # One job at a time per device; both devices busy at once.
    by_device: dict[str, list[tuple[float, float]]] = {}
    for r in done.values():
        by_device.setdefault(r.device, []).append((r.started, r.finished))
    assert set(by_device) == {"5", "6"}
    for spans in by_device.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    overlap = any(a0 < b1 and b0 < a1 for a0, a1 in by_device["5"] for b0, b1 in by_device["6"])
    assert overlap
    # No evaluation child of the killed slot is left running.
    assert kill_marked("never-used") == 0


@pytest.mark.slow
def test_abort_cancels_the_queue_and_kills_the_running_job_at_once(spec) -> None:
    """What an interrupted optimize run does with its pool: no waiting for results nobody will read."""
    pool = EvalPool("cpu", devices=[Device("cpu", "", "cpu slot 0")], compile_ahead=False)
    running = pool.submit(spec, variant(spec, HANG, "running"), SETTINGS, [1, 2])
    queued = pool.submit(spec, variant(spec, KERNEL, "queued"), SETTINGS, [1, 2])
    deadline = time.monotonic() + 60
    while pool.slots[0].process is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the slot is at work on the hanging job
    mark = pool.slots[0].mark
    started = time.monotonic()
    pool.abort()
    assert time.monotonic() - started < 5.0  # its timeout is 12 s
    assert queued.cancelled()
    with pytest.raises(KforgeError, match="closed while this candidate was being evaluated"):
        running.result(timeout=1)
    assert kill_marked(mark) == 0  # the slot and its evaluation children are gone
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(spec, variant(spec, KERNEL, "late"), SETTINGS, [1, 2])

