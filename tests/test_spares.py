"""Spare workers: the next candidate's worker starts as an evaluation ends, serves exactly one evaluation,
and nothing of it outlives the session."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.result import EvalSettings
from kforge_bot.evaluate.spares import SpareWorkers
from kforge_bot.spec import Implementation, load_spec

ADV = Path(__file__).parent / "data" / "adversarial"
QUICK = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=60)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


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
