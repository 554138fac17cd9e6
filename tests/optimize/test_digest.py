"""The profile digest the agents read (kforge_bot.optimize.digest)."""

from __future__ import annotations

from pathlib import Path

from test_trajectory import result, start_event

from kforge_bot.optimize.digest import profile_digest
from kforge_bot.optimize.trajectory import Trajectory

CEILINGS = {"bandwidth_gbs": 100.0, "tflops": {}, "origin": "measured", "source": "test"}
COUNTERS = {"available": True, "tool": "ncu", "kernels": [{"kernel": "k", "duration_us": 900.0}],
            "summary": {"class": "memory-bound", "speed_of_light": 0.5, "dominant": "k", "total_us": 900.0}}


def test_a_digest_has_the_time_the_roofline_position_and_the_counters_before_and_after(tmp_path: Path) -> None:
    t = Trajectory.create(tmp_path)
    start_event(t)
    t.append("baseline", result=result(speedup=1.0, base_ms=2.0, cand_ms=2.0), eval_s=1.0)
    t.append("workload", shape_sets=[{"bytes": 50e6, "flops": None}], basis="test")
    t.append("ceilings", ceilings=CEILINGS)
    assert profile_digest(t.record, 7) == {}  # nothing measured under that number
    before = profile_digest(t.record, 0)
    assert before["time_ms"] == 2.0 and "ncu" not in before
    assert before["roofline"]["achieved_gbs"] == 25.0 and before["roofline"]["bandwidth_fraction"] == 0.25
    assert before["roofline"]["ceilings_origin"] == "measured" and "bound" not in before["roofline"]  # unknown

    t.append("counters", iteration=0, **COUNTERS)
    t.append("candidate", iteration=1, file=t.write_source("0001.py", "x"), sha256="a")
    t.append("result", iteration=1, result=result(speedup=2.0, base_ms=2.0, cand_ms=1.0), accepted=True)
    t.append("counters", iteration=1, **{**COUNTERS, "kernels": [{"kernel": "k", "duration_us": 450.0}]})
    after = profile_digest(t.record, 1)
    assert after["time_ms"] == 1.0 and after["roofline"]["achieved_gbs"] == 50.0
    assert after["ncu"] == [{"kernel": "k", "duration_us": 450.0}] and after["ncu_before"] == COUNTERS["kernels"]
    assert after["ncu_summary"] == {"class": "memory-bound", "speed_of_light": 0.5, "dominant": "k"}
    assert after["counters_tool"]
