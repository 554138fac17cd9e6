"""The run's state folded from its events (kforge_bot.optimize.record)."""

from __future__ import annotations

from pathlib import Path

from test_trajectory import result, start_event

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
