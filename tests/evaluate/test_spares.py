"""Spare workers: the next candidate's worker starts as an evaluation ends, serves exactly one evaluation,
and nothing of it outlives the session."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.spares import SpareWorkers
from kforge_bot.kernelspec import Implementation, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"
QUICK = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=60)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_the_next_evaluation_takes_the_worker_started_for_it_and_close_leaves_nothing(tmp_path: Path) -> None:
    spec = load_spec(ADV / "problem.py")
    honest = Implementation.from_file(ADV / "honest.py", "ModelNew")
    wrong = Implementation.from_file(ADV / "zeros.py", "ModelNew")
    spares = SpareWorkers(tmp_path)
    first = evaluate(spec, honest, "cpu", QUICK, spares=spares)
    assert first.verdict == "pass", first.reason
    assert first.details["phases"]["worker_started_early"] is False
    spare = spares._spare
    assert spare is not None and _alive(spare.worker.proc.pid) and spare.work.parent == tmp_path
    second = evaluate(spec, wrong, "cpu", QUICK, spares=spares)
    assert second.details["phases"]["worker_started_early"] is True and spares.taken == 1
    assert second.verdict == "incorrect", second.reason  # a spare judges as a fresh worker does
    assert not _alive(spare.worker.proc.pid) or spare.worker.proc.poll() is not None
    assert not spare.work.exists()  # the evaluation that took it removed its scratch
    third = spares._spare
    assert third is not None and third.worker is not spare.worker  # one spare serves one evaluation
    spares.close()
    assert third.worker.proc.poll() is not None and not third.work.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_spare_started_for_another_kernel_is_discarded_not_used(tmp_path: Path) -> None:
    spec = load_spec(ADV / "problem.py")
    honest = Implementation.from_file(ADV / "honest.py", "ModelNew")
    spares = SpareWorkers(tmp_path)
    evaluate(spec, honest, "cpu", QUICK, spares=spares)
    stale = spares._spare
    assert stale is not None
    # The same kernel from another folder: the sandbox would show other sources, so the spare does not fit.
    elsewhere = Path(tempfile.mkdtemp(dir=tmp_path))
    for name in ("problem.py", "honest.py"):
        (elsewhere / name).write_text((ADV / name).read_text())
    other = evaluate(load_spec(elsewhere / "problem.py"), Implementation.from_file(elsewhere / "honest.py", "ModelNew"),
                     "cpu", QUICK, spares=spares)
    assert other.verdict == "pass", other.reason
    assert other.details["phases"]["worker_started_early"] is False and spares.taken == 0
    assert stale.worker.proc.poll() is not None and not stale.work.exists()
    spares.close()


@pytest.mark.slow
def test_a_spare_held_off_the_device_serves_its_request_and_reports_its_boot(tmp_path: Path) -> None:
    """On a GPU the next spare starts during a timed run and waits for `release` before it touches the device;
    a request that comes first releases it (the go line must not be read as the request's nonce)."""
    from kforge_bot.evaluate.api import _start_spare
    from kforge_bot.evaluate.spares import Spare, _discard

    spec = load_spec(ADV / "problem.py")
    honest = Implementation.from_file(ADV / "honest.py", "ModelNew")
    spares = SpareWorkers(tmp_path)
    first = evaluate(spec, honest, "cpu", QUICK, spares=spares)
    boot = first.details["phases"]["candidate_worker"]["boot"]
    assert boot["boot_s"] > 0 and boot["warm_up_s"] >= 0 and "request_waited_for_worker_s" in boot
    made = spares._spare
    assert made is not None  # its key is kept; a held worker replaces the plain one
    worker, work = _start_spare(_view_of(spec, honest) if made.worker.sandboxed else None, "cpu", tmp_path,
                                hold_device=True)
    spares._spare = Spare(made.key, worker, work)
    _discard(made)
    second = evaluate(spec, honest, "cpu", QUICK, spares=spares)  # never released: the request does it
    assert second.details["phases"]["worker_started_early"] is True
    assert second.verdict == "pass", second.reason
    held = second.details["phases"]["candidate_worker"]["boot"]
    assert held["held_off_device_s"] >= 0 and held["warm_up_s"] >= 0  # the wait for its go is not warm-up
    spares.close()
    assert list(tmp_path.iterdir()) == []


def _view_of(spec, candidate):
    from kforge_bot.evaluate.sandbox import sandbox_view

    return sandbox_view(spec, [candidate, spec.baseline], "cpu", Path("/scratch"), QUICK)


# The spares are the bot's side: on scripted workers (tests/fakes/workers.py) in the fast lane, on real ones in the
# whole suite (a real worker's start is seconds: six here).
@pytest.mark.parametrize("workers", [pytest.param("real", marks=pytest.mark.slow), "scripted"])
def test_where_base_and_head_each_have_a_worker_the_next_evaluation_finds_both_started(tmp_path: Path,
                                                                                       workers: str) -> None:
    from fakes.workers import FakeWorkers

    with FakeWorkers().installed() if workers == "scripted" else contextlib.nullcontext():
        _both_started(tmp_path)


def _both_started(tmp_path: Path) -> None:
    from fakes.gate_repos import tiny_spec_in, write

    spec = tiny_spec_in(tmp_path / "repo")
    write(tmp_path / "head", "k.py", HEAD)
    head = Implementation(HEAD, "kernel", "k.py", str(tmp_path / "head"))
    spares = SpareWorkers(tmp_path / "spares")
    (tmp_path / "spares").mkdir()
    timed = EvalSettings(seeds=1, timing_budget_s=0.3, profile=False)
    first = evaluate(spec, head, "cpu", timed, baseline=spec.baseline, spares=spares)
    assert first.verdict == "pass", first.reason
    assert first.details["phases"]["baseline_worker_started_early"] is False
    base_spare = spares._base
    assert base_spare is not None and _alive(base_spare.worker.proc.pid)
    second = evaluate(spec, head, "cpu", timed, baseline=spec.baseline, spares=spares)
    assert second.verdict == "pass", second.reason
    phases = second.details["phases"]
    assert phases["worker_started_early"] is True and phases["baseline_worker_started_early"] is True
    assert spares.taken == 1 and spares.taken_base == 1
    assert base_spare.worker.proc.poll() is not None and not base_spare.work.exists()
    # A lone evaluation next (nothing timed): the base's spare is not kept for it.
    alone = evaluate(spec, head, "cpu", QUICK, spares=spares)
    assert alone.verdict == "pass", alone.reason
    assert spares._base is None
    spares.close()
    assert list((tmp_path / "spares").iterdir()) == []


HEAD = "def kernel(x, y):\n    return y + x * 2.0  # the base's, written differently\n"
