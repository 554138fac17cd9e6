"""What passes between the loop and its partners (kforge_bot.optimize.protocols): the view a proposer reads, and
the exchange it answers, as data."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from test_trajectory import result, start_event

from kforge_bot.errors import MalformedReply
from kforge_bot.optimize.protocols import Event, Exchange, Proposal, RunView
from kforge_bot.optimize.trajectory import Trajectory


def answer_of(exchange: Exchange) -> tuple[list[Event], Proposal | None]:
    """Take a proposer call's answer as the loop does: (the events it reported, its proposal); its signal raised."""
    if exchange.signal is not None:
        raise exchange.signal
    return exchange.events, exchange.proposal


def view_of(trajectory: Trajectory, parallel: int = 1, beam: int = 1, iteration: int = 0, slot: int = 0,
            taken: tuple[dict[str, int], ...] = ()) -> RunView:
    return RunView(record=trajectory.record, hardware_text="Device kind: cpu", parallel=parallel, beam=beam,
                   baseline_source="as written\n", read_source=trajectory.read_source, iteration=iteration,
                   slot=slot, taken=taken)


def asking(view: RunView, iteration: int, slot: int = 0, taken: tuple[dict[str, int], ...] = ()) -> RunView:
    """The view of a proposal request: which candidate of the round."""
    return replace(view, iteration=iteration, slot=slot, taken=taken)


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


def test_an_exchange_keeps_its_events_in_order_each_stamped_when_it_happened() -> None:
    before = time.time()
    out = Exchange()
    out.report("prompt", iteration=1, agent="generator", messages=[])
    out.report("reply", iteration=1, agent="generator", text="")
    assert [e.kind for e in out.events] == ["prompt", "reply"]
    assert before <= out.events[0].at <= out.events[1].at <= time.time()
    assert out.events[0] == Event("prompt", {"iteration": 1, "agent": "generator", "messages": []})  # time aside
    out.signal = MalformedReply("no code")
    with pytest.raises(MalformedReply):
        answer_of(out)
    assert answer_of(Exchange(proposal=Proposal("v1\n"))) == ([], Proposal("v1\n"))


def test_the_trajectory_writes_an_event_under_the_moment_it_happened(tmp_path: Path) -> None:
    t = Trajectory.create(tmp_path)
    event = Event("prompt", {"iteration": 1}, at=1000.0)
    assert t.append(event.kind, at=event.at, **event.fields)["time"] == 1000.0
    assert t.append("reply", iteration=1)["time"] >= time.time() - 60
