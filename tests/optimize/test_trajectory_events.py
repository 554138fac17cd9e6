"""The trajectory's events as types (kforge_bot.optimize.trajectory_events): each line parses to the type the
record folds, with the defaults a line that lacks a field has always had."""

from __future__ import annotations

from test_trajectory import result

from kforge_bot.optimize.record import RunRecord
from kforge_bot.optimize.trajectory_events import (CandidateWritten, CountersCollected, Judged, Malformed, ModelReply,
                                                   Start, parse)


def line(kind: str, **fields: object) -> dict:
    return {"event": kind, "time": 1.0, "session": 1, **fields}


def test_each_kind_parses_to_its_type_and_the_unfolded_ones_to_none() -> None:
    assert parse(line("start", kernel="k")) == Start(line("start", kernel="k"))
    assert parse(line("reply", iteration=2, text="", usage={"total_tokens": 9}, llm_s=0.5)) == ModelReply(
        2, "generator", {"total_tokens": 9}, None, 0, 0, 0.5)
    assert parse(line("candidate", iteration=3, file="c/0003.py", sha256="a")) == CandidateWritten(3, "c/0003.py", "a")
    unusable = Malformed(4, "analyst", "no list")
    assert parse(line("malformed", iteration=4, agent="analyst", feedback="no list")) == unusable
    assert parse(line("counters", iteration=None, available=False, reason="no ncu")) == CountersCollected(
        None, {"available": False, "reason": "no ncu"}, "no ncu")
    judged = parse(line("result", iteration=5, result={"verdict": "pass"}, accepted=True, loop_s=0.25, round="2"))
    assert judged == Judged(5, {"verdict": "pass"}, True, loop_s=0.25, round=2)
    assert parse(line("prompt", iteration=1, messages=[])) is None and parse(line("from_a_newer_version")) is None


def test_the_record_folds_by_type_as_it_applies_by_line() -> None:
    by_line, by_type = RunRecord(), RunRecord()
    by_line.apply(line("candidate", iteration=1, file="c/0001.py", sha256="a", change="TILE_N 32->64"))
    by_line.apply(line("result", iteration=1, result=result(speedup=1.5), accepted=True, eval_s=2.0))
    by_type.fold(CandidateWritten(1, "c/0001.py", "a", "TILE_N 32->64"))
    by_type.fold(Judged(1, result(speedup=1.5), True, eval_s=2.0))
    assert by_line.iterations == by_type.iterations and by_type.best is by_type.iterations[1]
    by_type.fold("a string is no event")  # nothing to fold
    assert by_type.best is not None and by_type.best.change == "TILE_N 32->64"
