"""The loop's profiler runs: hardware counters (kforge_bot.optimize.counters) of the kernel as written and of each
accepted candidate, collected between evaluations and recorded as counters events."""

from __future__ import annotations

from kforge_bot.optimize.counters import DETAILS_FILE, Counters, details_csv
from kforge_bot.optimize.digest import profile_digest
from kforge_bot.optimize.trajectory import Trajectory
from kforge_bot.kernelspec import Implementation


def profile(counters: Counters | None, trajectory: Trajectory, iteration: int, implementation: Implementation) -> None:
    """Hardware counters for the kernel as written (0) or an accepted candidate, recorded as a counters event:
    between evaluations, never beside a timed run. The report folder's ncu-details.csv then holds the kernel as
    written and the best."""
    record = trajectory.record
    if counters is None or iteration in record.counters:
        return
    if counters.reason is not None:
        if not record.counters_note:
            trajectory.append("counters", iteration=None, available=False, reason=counters.reason)
        return
    got = counters.collect(iteration, implementation, profile_digest(record, iteration).get("time_ms"),
                           device_name=str((record.baseline or {}).get("device_name") or ""))
    trajectory.append("counters", iteration=iteration, **got)
    best = record.best
    (trajectory.root / DETAILS_FILE).write_text(details_csv(
        record.counters.get(0), record.counters.get(best.iteration) if best else None,
        f"iteration {best.iteration}" if best else "best"), encoding="utf-8")
