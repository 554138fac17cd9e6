"""The profile digest the agents read (the analyst's prompt, the tuner's first move): one kernel version's
profile, roofline position, time and hardware counters, from the run's record."""

from __future__ import annotations

from typing import Any

from kforge_bot.optimize.counters import tool_title
from kforge_bot.optimize.record import RunRecord
from kforge_bot.optimize.roofline import roofline_position


def profile_digest(record: RunRecord, iteration: int) -> dict[str, Any]:
    """The profile digest of the baseline (0) or of a candidate, with its roofline position and time."""
    result = record.result_for(iteration) or {}
    side = "baseline" if iteration == 0 else "candidate"
    digest = dict((result.get("profile") or {}).get(side) or {})
    position = roofline_position(result, side, record.workload, record.ceilings)
    if position:
        keep = ("achieved_gbs", "bandwidth_fraction", "achieved_tflops", "compute_fraction", "roofline_fraction",
                "arithmetic_intensity", "ridge_intensity", "bound", "basis")
        roof = {k: position[k] for k in keep if position.get(k) not in (None, "", "unknown")}
        if position.get("ceilings"):
            roof["ceilings_origin"] = position["ceilings"].get("origin")
        digest["roofline"] = roof
    rows = (result.get("details") or {}).get("timing") or []
    if rows:
        digest["time_ms"] = (rows[0].get(side) or {}).get("median_ms")
        if len(rows) > 1:
            digest["time_ms_per_shape_set"] = [(r.get(side) or {}).get("median_ms") for r in rows]
    counters = record.counters.get(iteration) or {}
    if counters.get("available"):  # the hardware's own counters: per kernel, with the class they imply
        digest["ncu"] = counters["kernels"]
        digest["counters_tool"] = tool_title(counters)
        digest["ncu_summary"] = {k: counters["summary"].get(k) for k in ("class", "speed_of_light", "dominant")}
        before = record.counters.get(0) or {}
        if iteration and before.get("available"):
            digest["ncu_before"] = before["kernels"]
    return digest
