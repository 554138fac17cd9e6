"""What the loop asks of a proposer (kforge_bot.optimize.proposer): the view it reads and the defaults of the
protocol's optional calls."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from test_trajectory import result, start_event

from kforge_bot.optimize.proposer import Event, Proposal, Proposer, RunView, Steps
from kforge_bot.optimize.record import IterationRecord
from kforge_bot.optimize.trajectory import Trajectory


def run_to_answer(steps: Steps) -> tuple[list[Event], object]:
    """Drive a proposer call as the loop does: (the events it reported, its answer)."""
    events = []
    while True:
        try:
            events.append(next(steps))
        except StopIteration as done:
            return events, done.value


def view_of(trajectory: Trajectory, parallel: int = 1, beam: int = 1) -> RunView:
    return RunView(record=trajectory.record, hardware_text="Device kind: cpu", parallel=parallel, beam=beam,
                   baseline_source="as written\n", read_source=trajectory.read_source)


class Counting(Proposer):
    """Only what a proposer must say: its next candidate; the rest is the protocol's defaults."""

    mode = "test"

    def __init__(self) -> None:
        self.observed: list[int] = []

    def propose(self, iteration: int, view: RunView) -> Steps[Proposal]:
        yield Event("prompt", {"iteration": iteration, "agent": "generator", "messages": []})
        return Proposal(source=f"v{iteration}\n")

    def observe(self, it: IterationRecord, view: RunView) -> Steps[None]:
        yield from ()
        self.observed.append(it.iteration)


def test_the_view_reads_sources_from_the_record_and_falls_back_to_the_kernel_as_written(tmp_path: Path) -> None:
    t = Trajectory.create(tmp_path)
    start_event(t)
    view = view_of(t)
    assert view.source_of(0) == view.best_source() == "as written\n"
    t.append("baseline", result=result(speedup=1.0, base_ms=2.0, cand_ms=2.0), eval_s=1.0)
    t.append("candidate", iteration=1, file=t.write_source("0001.py", "faster\n"), sha256="a")
    t.append("result", iteration=1, result=result(speedup=1.5), accepted=True)
    t.append("candidate", iteration=2, file=t.write_source("0002.py", "slower\n"), sha256="b")
    t.append("result", iteration=2, result=result("incorrect"), accepted=False)
    assert view.source_of(2) == "slower\n" and view.best_source() == "faster\n"
    assert view.source_of(7) == "as written\n"  # no such candidate
    assert view.digest(1)["time_ms"] == 1.0 and view.digest(0)["time_ms"] == 2.0


def test_the_defaults_make_a_round_of_one_and_observe_each_candidate_in_order(tmp_path: Path) -> None:
    t = Trajectory.create(tmp_path)
    view = view_of(t, parallel=3)
    proposer = Counting()
    assert proposer.describe() == {}
    assert run_to_answer(proposer.prepare()) == ([], None)
    assert run_to_answer(proposer.start(view)) == ([], None)
    events, first = run_to_answer(proposer.propose_for(4, 0, [], view))
    assert [e.kind for e in events] == ["prompt"] and first == Proposal(source="v4\n")
    assert run_to_answer(proposer.propose_for(5, 1, [], view)) == ([], None)  # nothing distinct for slot 1
    its: Sequence[IterationRecord] = [IterationRecord(iteration=n) for n in (3, 1, 2)]
    assert run_to_answer(proposer.observe_round(its, view)) == ([], None)
    assert proposer.observed == [3, 1, 2]


def test_a_proposer_must_say_how_it_proposes() -> None:
    class Silent(Proposer):
        mode = "silent"

    with pytest.raises(TypeError, match="propose"):
        Silent()  # type: ignore[abstract]
