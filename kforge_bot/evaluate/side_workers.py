"""Base and head in two workers: both run at once, their timing driven by the parent, one outcome judged.

Each worker runs the candidate role on its own side (evaluate.wire.plan.Plan.side): the head's is checked as every
candidate is, the base's only built and timed. Both build and check concurrently; each timing session (a shape set,
or one direction of a backward) starts once both have opened it, and the parent drives it (evaluate.pair_driver).
What is judged is the head's outcome, with the parent's timing figures in place of the ones a worker would have
measured; where the base's worker ends first without a result (a crash, a hang, a failure in its own call) the
outcome is the base's failure (`failed_side` "baseline" in the verdict), and a worker the parent stops because the
other side ended is never charged. Inside a session only the side being asked runs: the other's processes are
stopped (evaluate.turns), and every worker runs again once the session ends, however it ends.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kforge_bot.evaluate.pair_driver import HiddenWork, RemoteSide, SideEnded, drive_session
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.sandbox import WorkerOutcome, WorkerProcess, kill_group
from kforge_bot.evaluate.shipping import Stager
from kforge_bot.evaluate.turns import Turns

POLL_S = 0.02  # how often the parent looks for a session's opening (never inside one)


@dataclass
class SideRun:
    """One side's worker running in a thread of the parent's."""

    remote: RemoteSide
    thread: threading.Thread | None = None
    outcome: WorkerOutcome | None = None


@dataclass
class PairOutcome:
    """The outcome to judge, the parent's timing figures by session ("<shape set>:<direction>"), and the base's."""

    judged: WorkerOutcome
    driven: dict[str, dict[str, Any]] = field(default_factory=dict)
    base: WorkerOutcome | None = None


def run_sides(head: WorkerProcess, base: WorkerProcess, settings: EvalSettings, timed_shapes: int, *,
              stall_s: float, scratch_limit: int | None,
              progress: Callable[[dict[str, Any]], None] | None, stager: Stager | None = None) -> PairOutcome:
    """Run both workers (their requests sent already) to the end, driving every timing session they open. `stager`:
    the head's worker asks for its inputs (Plan.ship_inputs)."""
    runs = {"c": SideRun(RemoteSide("candidate", head, progress, stager)),
            "b": SideRun(RemoteSide("baseline", base, None))}
    for side in runs.values():
        side.thread = threading.Thread(target=_run_one, args=(side, settings.timeout_s, stall_s, scratch_limit),
                                       daemon=True)
        side.thread.start()
    driven: dict[str, dict[str, Any]] = {}
    first_ended, rejected = "", ""
    turns = Turns({"c": head.proc, "b": base.proc})
    try:
        first_ended, rejected = _drive_all(runs, settings, timed_shapes, progress, driven, turns)
    except (KeyError, TypeError, ValueError):  # an answer that is no figure: only a forged channel sends one
        rejected = "a worker's timing answers were unreadable (no figures where figures belong)"
    finally:
        turns.release()  # never a worker left stopped, whatever ended the pair
        # Whatever has not ended is waiting on the parent: killed here, and never charged for it.
        for side in runs.values():
            if not side.remote.ended.is_set():
                kill_group(side.remote.worker.proc)
        for side in runs.values():
            if side.thread is not None:
                side.thread.join()
    head_outcome, base_outcome = runs["c"].outcome, runs["b"].outcome
    assert head_outcome is not None and base_outcome is not None
    if rejected:
        return PairOutcome(_rejected(head_outcome, rejected), driven, base_outcome)
    if first_ended == "b" and not _ok(base_outcome):
        return PairOutcome(base_failure(base_outcome), driven, base_outcome)
    return PairOutcome(head_outcome, driven, base_outcome)


def _run_one(side: SideRun, timeout_s: float, stall_s: float, scratch_limit: int | None) -> None:
    try:
        side.outcome = side.remote.worker.run(None, timeout_s, on_message=side.remote.on_message, stall_s=stall_s,
                                              scratch_limit=scratch_limit)
    finally:
        side.remote.ended.set()


def _drive_all(runs: dict[str, SideRun], settings: EvalSettings, timed_shapes: int,
               progress: Callable[[dict[str, Any]], None] | None, driven: dict[str, dict[str, Any]],
               turns: Turns) -> tuple[str, str]:
    """Every session both workers open, in order, until both have ended. Returns (the side whose worker ended while
    the other still waited for it, or ""; a rejection of the candidate's timing, or "")."""
    sides = {name: run.remote for name, run in runs.items()}
    while True:
        opened, ended = _open_both(sides)
        if ended:
            other = "b" if ended == "c" else "c"
            if other in opened or not _ok(runs[ended].outcome):
                return ended, ""
            # Ended with its result after the last session: the other side finishes too (the base's profile).
            opened, _ = _open_both({other: sides[other]})
            return (other, "") if opened else ("", "")
        labels = {name: str(message.get("session")) for name, message in opened.items()}
        if labels["c"] != labels["b"] or any(m.get("op") != "open" for m in opened.values()):
            return "", (f"the candidate's worker asked to time {labels['c'][:40]!r} where the base's timed "
                        f"{labels['b']!r}")
        shape = int(labels["c"].split(":")[0])
        try:
            driven[labels["c"]] = drive_session(sides, opened["c"], settings, timed_shapes, progress, shape, turns)
        except SideEnded as ended_side:
            return ("b" if ended_side.side == "baseline" else "c"), ""
        except HiddenWork as hidden:
            return "", f"timed run, shape set {shape}: {hidden}"
        finally:
            turns.release()  # between sessions both sides build and check at once
        for side in sides.values():
            side.close()


def _open_both(sides: dict[str, RemoteSide]) -> tuple[dict[str, dict[str, Any]], str]:
    """The next message of every side (each opens its next session), or, as soon as one side's worker has ended
    instead, what came so far and that side's name."""
    opened: dict[str, dict[str, Any]] = {}
    while len(opened) < len(sides):
        waiting = True
        for name, side in sides.items():
            if name in opened:
                continue
            try:
                opened[name] = side.answers.get_nowait()
                waiting = False
            except queue.Empty:
                if side.ended.is_set() and side.answers.empty():
                    return opened, name
        if waiting:
            time.sleep(POLL_S)
    return opened, ""


def merge_timing(result: dict[str, Any], driven: dict[str, dict[str, Any]]) -> None:
    """The head's timing entries, each with the parent's figures for its session in place of the worker's."""
    for entry in result.get("timing") or []:
        shape = entry.get("shape")
        entry.update(driven.get(f"{shape}:", {}))
        for direction, part in (entry.get("directions") or {}).items():
            part.update(driven.get(f"{shape}:{direction}", {}))


def base_failure(base: WorkerOutcome) -> WorkerOutcome:
    """The base's worker's end as the verdict's: a crash (or a timeout) in the base's own code, charged to it."""
    message = base.result or {}
    reason = str(message.get("reason") or f"its worker {base.exit_description()}")
    status = "timeout" if base.timed_out else "crash"
    result = {"type": "result", "status": status, "side": "baseline", "detail": message.get("detail", ""),
              "reason": reason if reason.startswith("the baseline") else f"the baseline's worker: {reason}"}
    return WorkerOutcome(messages=[result], returncode=base.returncode, wall_s=base.wall_s, log_tail=base.log_tail,
                         sandboxed=base.sandboxed)


def _rejected(head: WorkerOutcome, reason: str) -> WorkerOutcome:
    result = {"type": "result", "status": "rejected", "reason": reason}
    return WorkerOutcome(messages=[*head.messages, result], returncode=head.returncode, wall_s=head.wall_s,
                         log_tail=head.log_tail, sandboxed=head.sandboxed, shared=head.shared)


def _ok(outcome: WorkerOutcome | None) -> bool:
    if outcome is None:
        return False
    return (outcome.result or {}).get("status") == "ok" and not outcome.timed_out
