"""The run's trajectory: JSON lines on disk, folded into the loop's state, replayed identically on resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.wire.result import EvalResult, TimingStats
from kforge_bot.optimize.trajectory import TRAJECTORY_FILE, Trajectory, read_events, replay


def result(verdict: str = "pass", speedup: float | None = 1.5, ci: tuple[float, float] | None = (1.3, 1.7),
           base_ms: float = 2.0, cand_ms: float = 1.0, shape: list[int] | None = None, dtype: str = "float32",
           reason: str = "") -> dict[str, Any]:
    """A result in the exact shape `evaluate` returns (built through EvalResult itself)."""
    shape = shape or [128, 128]
    r = EvalResult(verdict=verdict, reason=reason or f"{verdict} reason", target="cpu", device_name="Test CPU")
    if verdict == "pass":
        r.speedup, r.speedup_ci = speedup, ci
        r.baseline = TimingStats(base_ms, base_ms, base_ms, base_ms, 10)
        r.candidate = TimingStats(cand_ms, cand_ms, cand_ms, cand_ms, 10)
        r.details["timing"] = [{"shape_set": 0, "baseline": r.baseline.to_dict(), "candidate": r.candidate.to_dict(),
                                "speedup": speedup, "speedup_ci": list(ci or (0, 0)), "pairs": 10}]
    r.correctness = {"ok": verdict == "pass", "records": [
        {"case": "shape set 0 seed 1", "shape_set": 0, "seed": 1,
         "outputs": [{"index": 0, "shape": shape, "dtype": dtype, "ok": verdict == "pass"}]}]}
    return r.to_dict()


def start_event(trajectory: Trajectory) -> None:
    trajectory.append("start", schema=1, kernel="k", kernel_file="k.py", mode="tuner", target="cpu",
                      baseline_file="candidates/baseline.py", baseline_sha256="x", budgets={"iterations": 5})


def test_events_are_written_as_they_happen_and_replay_to_the_same_state(tmp_path: Path) -> None:
    t = Trajectory.create(tmp_path / "run")
    start_event(t)
    seen: list[str] = []
    t.listeners.append(lambda e: seen.append(e["event"]))
    t.append("baseline", result=result(speedup=1.0, ci=(0.99, 1.01)), eval_s=3.0)
    t.append("recommendations", for_iteration=0, items=["raise TILE_N to 64"])
    # 1: compile error, 2: malformed reply, 3: accepted, 4: correct but slower
    t.append("candidate", iteration=1, file=t.write_source("0001.py", "bad"), sha256="a", change="c1")
    t.append("result", iteration=1, result=result("compile_error"), accepted=False, eval_s=1.0, iteration_s=1.2,
             history_entry={"iteration": 1, "verdict": "compile_error"})
    assert len(read_events(t.path)) == 5  # on disk before the next step starts
    t.append("malformed", iteration=2, agent="generator", feedback="no code block",
             history_entry={"iteration": 2, "verdict": "malformed"})
    t.append("malformed", iteration=2, agent="analyst", feedback="no list")  # costs nothing
    assert [h["verdict"] for h in t.record.history] == ["compile_error", "malformed"]
    assert t.record.since_progress == 2
    t.append("candidate", iteration=3, file=t.write_source("0003.py", "good"), sha256="b", change="TILE_N 32->64",
             assignment={"TILE_N": 64})
    t.append("result", iteration=3, result=result(speedup=2.0, ci=(1.8, 2.2)), accepted=True, eval_s=2.0,
             iteration_s=2.1)
    assert t.record.history == [] and t.record.since_progress == 0  # failures were attempts on the old best
    t.append("candidate", iteration=4, file=t.write_source("0004.py", "meh"), sha256="c", assignment={"TILE_N": 32})
    t.append("result", iteration=4, result=result(speedup=0.9, ci=(0.8, 1.0)), accepted=False, eval_s=2.0,
             iteration_s=2.5, history_entry={"iteration": 4, "verdict": "pass"})
    t.append("reply", iteration=5, agent="generator", text="...", prompt_tokens=10, completion_tokens=5,
             model="m1", usage={"total_tokens": 15, "calls": 1}, llm_s=0.5)

    live = t.record
    again = Trajectory.open(tmp_path / "run")
    assert again.session == 2
    for rec in (live, again.record, replay(tmp_path / "run")):
        assert rec.iterations_used == 4
        assert rec.best is not None and rec.best.iteration == 3 and rec.best.speedup == 2.0
        assert rec.best.change == "TILE_N 32->64"
        assert [h["verdict"] for h in rec.history] == ["pass"]
        assert rec.since_progress == 1
        assert rec.recommendations == ["raise TILE_N to 64"] and rec.analysed_for == 0
        assert rec.usage["total_tokens"] == 15 and rec.models == ["m1"]
        assert rec.next_iteration == 5 and rec.pending is None
        assert rec.tuner_results() == [({"TILE_N": 64}, 2.0), ({"TILE_N": 32}, 0.9)]
        assert rec.iterations[4].overhead_s == pytest.approx(0.5)
    assert seen[0] == "baseline" and seen[-1] == "reply"
    assert again.read_source("candidates/0003.py") == "good"
    lines = (tmp_path / "run" / TRAJECTORY_FILE).read_text().splitlines()
    assert all(json.loads(line)["session"] == 1 for line in lines)


def test_a_line_cut_short_by_a_kill_is_dropped_but_damage_elsewhere_is_an_error(tmp_path: Path) -> None:
    t = Trajectory.create(tmp_path)
    start_event(t)
    t.append("baseline", result=result(), eval_s=1.0)
    with open(t.path, "a") as handle:
        handle.write('{"event": "candidate", "iter')  # the process died mid-write
    assert [e["event"] for e in read_events(t.path)] == ["start", "baseline"]
    Trajectory.open(tmp_path).append("session")  # resumable, and appending after it works
    text = t.path.read_text().splitlines()
    t.path.write_text("\n".join([text[0], "not json", *text[1:]]) + "\n")
    with pytest.raises(KforgeError, match="line 2: not a JSON object"):
        read_events(t.path)


def test_create_and_open_refuse_the_wrong_folder(tmp_path: Path) -> None:
    with pytest.raises(KforgeError, match="not a kforge-bot optimize report folder"):
        Trajectory.open(tmp_path)
    t = Trajectory.create(tmp_path)
    t.append("session")
    with pytest.raises(KforgeError, match="does not begin with a start event"):
        Trajectory.open(tmp_path)
    with pytest.raises(KforgeError, match="already holds a run"):
        Trajectory.create(tmp_path)
