"""The run's state folded from its events (kforge_bot.optimize.record)."""

from __future__ import annotations

from pathlib import Path

from test_trajectory import result, start_event

from kforge_bot.optimize.record import tuner_score
from kforge_bot.optimize.trajectory import Trajectory


def test_a_candidate_without_a_result_is_pending_and_keeps_its_iteration_number(tmp_path: Path) -> None:
    t = Trajectory.create(tmp_path)
    start_event(t)
    t.append("candidate", iteration=1, file=t.write_source("0001.py", "x"), sha256="a")
    t.append("result", iteration=1, result=result("incorrect"), accepted=False)
    t.append("reply", iteration=2, agent="generator", text="```python\n...```", prompt_tokens=3, completion_tokens=4)
    t.append("candidate", iteration=2, file=t.write_source("0002.py", "y"), sha256="b")
    rec = Trajectory.open(tmp_path).record
    assert rec.pending is not None and rec.pending.iteration == 2
    assert rec.next_iteration == 2 and rec.iterations_used == 1
    assert rec.iterations[2].prompt_tokens == 3  # the tokens of the reply stay with its iteration


def test_a_rounds_record_numbers_fresh_iterations_and_keeps_the_beam(tmp_path: Path) -> None:
    t = Trajectory.create(tmp_path)
    start_event(t)
    for n, speedup, verdict in ((1, 1.2, "pass"), (2, 1.6, "pass"), (3, None, "crash")):
        t.append("candidate", iteration=n, file=t.write_source(f"000{n}.py", str(n)), sha256=str(n), round=1,
                 parent=0, model="m")
        t.append("result", iteration=n, result=result(verdict, speedup=speedup), accepted=n == 1, round=1)
    t.append("candidate", iteration=4, file=t.write_source("0004.py", "2"), sha256="2", round=2)
    t.append("result", iteration=4, result=result(speedup=1.6), accepted=False, round=2, duplicate_of=2)
    t.append("candidate", iteration=5, file=t.write_source("0005.py", "5"), sha256="5", round=3)
    t.append("candidate", iteration=6, file=t.write_source("0006.py", "6"), sha256="6", round=3)
    record = t.record
    assert [it.iteration for it in record.beam(2)] == [2, 1]  # by speedup; a crash and a repeat are no parents
    assert record.rounds == 3 and record.fresh_iteration == 7
    assert [it.iteration for it in record.pendings] == [5, 6] and record.pending is record.iterations[6]
    assert record.since_progress == 3 and record.best is record.iterations[1]
    assert record.iterations[1].model == "m" and record.iterations[4].duplicate_of == 2


def test_an_unusable_analyst_reply_costs_no_iteration_and_the_tuner_replays_only_its_own(tmp_path: Path) -> None:
    t = Trajectory.create(tmp_path)
    start_event(t)
    t.append("malformed", iteration=1, agent="analyst", feedback="no list")
    assert t.record.iterations_used == 0 and t.record.since_progress == 0
    t.append("candidate", iteration=1, file=t.write_source("0001.py", "x"), sha256="a", assignment={"B": 64})
    t.append("result", iteration=1, result=result("incorrect"), accepted=False)
    t.append("candidate", iteration=2, file=t.write_source("0002.py", "y"), sha256="b")  # an LLM's: no assignment
    t.append("result", iteration=2, result=result(speedup=1.1), accepted=False)
    assert t.record.tuner_results() == [({"B": 64}, None)]  # a failure scores None
    assert tuner_score(result(speedup=1.1)) == 1.1 and tuner_score(result("crash")) is None
