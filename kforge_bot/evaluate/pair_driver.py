"""The parent's side of a timed pair whose sides run in two worker processes: the interleaved schedule, driven here.

Base and head each load in a sandboxed worker of their own (kforge_bot.evaluate.side_workers), so nothing the head
loads (a module named like one of the base's, a C library loaded by the same path) can be what the base runs. The
schedule is measure_pair's (kforge_bot.evaluate.wire.timing), with its rules read from there: each side warmed up, the
device estimates, the graph decision (both sides replay graphs or neither does), the one lead both sides get, then
pairs in alternating order (B C, C B, ...) until the interval is tight, the budget is spent or the pair limit is
reached. The parent asks one worker at a time for one timed sample (kforge_bot.evaluate.worker.sample_server) and
keeps every figure: no worker sees the other's samples, and the pipe's round trip lies outside each sample's timed
region.
While one side is asked anything in a session, the other side's processes are all stopped (evaluate.turns): what
the head left running (a timer's handler, a thread) cannot take the cores the base's sample is timed on.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

from kforge_bot.evaluate.shipping import Stager
from kforge_bot.evaluate.wire.conditions import summarize
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.sandbox import WorkerProcess
from kforge_bot.evaluate.turns import Turns
from kforge_bot.evaluate.wire.stats import relative_half_width, speedup_from_pairs

SIDES = (("b", "baseline"), ("c", "candidate"))


class SideEnded(Exception):
    """A side's worker ended (its result sent, or dead) while the parent waited for it."""

    def __init__(self, side: str) -> None:
        super().__init__(side)
        self.side = side


class HiddenWork(Exception):
    """The candidate's samples left work outside their timed regions (paired_times.check_no_hidden_work's reason)."""


class RemoteSide:
    """One worker as the pair driver sees it: requests written to its stdin, answers read from its messages (the
    thread that runs `WorkerProcess.run` hands them over through `on_message`)."""

    def __init__(self, name: str, worker: WorkerProcess, forward: Callable[[dict[str, Any]], None] | None,
                 stager: Stager | None = None) -> None:
        self.name, self.worker, self.forward = name, worker, forward
        self.stager = stager  # a head's worker with shipped inputs asks for them (evaluate.shipping)
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.ended = threading.Event()
        # The worker's Target.calibrate figures: the first it sent, in its setup, before any candidate code existed
        # in it; None until then.
        self.settle_figures: dict[str, float] | None = None

    def on_message(self, message: dict[str, Any]) -> None:
        if message.get("phase") == "need_inputs" and self.stager is not None:
            try:
                answer = self.stager.answer(message)
            except Exception as exc:  # noqa: BLE001 - never the thread that reads the channel: the worker gets a no
                answer = {"op": "staged", "file": str(message.get("file") or ""), "ok": False,
                          "refused": f"{type(exc).__name__}: {exc}"[:300]}
            self.worker.command(answer)  # outside any session: the worker waits for it
        elif message.get("phase") == "calibrated":
            if self.settle_figures is None:
                self.settle_figures = _figures(message.get("settle"))
        elif message.get("phase") == "side":
            self.worker.waiting_on_parent = True  # silent now by the parent's choice: no stall
            self.answers.put(message)
        elif self.forward is not None:
            self.forward(message)

    def next_answer(self) -> dict[str, Any]:
        while True:
            try:
                return self.answers.get(timeout=0.2)
            except queue.Empty:
                if self.ended.is_set() and self.answers.empty():
                    raise SideEnded(self.name) from None

    def ask(self, op: str, **args: Any) -> Any:
        self.worker.waiting_on_parent = False
        self.worker.command({"op": op, **args})
        answer = self.next_answer()
        if answer.get("op") != op:
            raise SideEnded(self.name)  # out of step: only a worker whose channel was forged answers otherwise
        return answer.get("value")

    def close(self) -> None:
        self.worker.waiting_on_parent = False
        self.worker.command({"op": "close"})


def _figures(value: Any) -> dict[str, float]:
    """A worker's settle figures as numbers (each target checks their sense against its own: targets.cuda)."""
    if not isinstance(value, dict):
        return {}
    figures = {}
    for key, figure in list(value.items())[:8]:
        try:
            figures[str(key)[:40]] = float(figure)
        except (TypeError, ValueError):
            continue
    return figures


class TurnTaking:
    """A side that gets the turn (every other side stopped, evaluate.turns) before each request it is asked."""

    def __init__(self, side: Any, name: str, turns: Turns) -> None:
        self.side, self.name, self.turns = side, name, turns

    def ask(self, op: str, **args: Any) -> Any:
        self.turns.give(self.name)
        return self.side.ask(op, **args)


def drive_session(sides: dict[str, RemoteSide], info: dict[str, Any], settings: EvalSettings, timed_shapes: int,
                  progress: Callable[[dict[str, Any]], None] | None, shape: int,
                  turns: Turns | None = None) -> dict[str, Any]:
    """One shape set's (or one direction's) interleaved timing across the two workers, as measure_pair would time
    it in one: the same fields as paired_times.PairedTimes.to_dict(). Raises HiddenWork where the candidate's
    samples hid work (the caller rejects the candidate) and SideEnded where a worker ended. `turns` (keyed "b", "c"): each
    request goes to a side whose other side is stopped; the caller releases them after."""
    from kforge_bot.evaluate.wire import paired_times, timing  # the rules' one home (torch only once it compares)

    # Both sides' settles planned from the base worker's figures: the same work before each sample, expected alike.
    settle = dict(getattr(sides["b"], "settle_figures", None) or {})
    if turns is not None:
        sides = {s: TurnTaking(side, s, turns) for s, side in sides.items()}  # type: ignore[assignment, misc]
    started = time.monotonic()
    sets = int(info["sets"])
    refreshed = bool(info.get("refresh"))
    warm = {s: sides[s].ask("warm_up", warmup_ms=settings.warmup_ms) for s, _ in SIDES}
    longest = max(w["host_issue"] for w in warm.values())
    device = {s: warm[s]["eager"] for s, _ in SIDES}
    if not refreshed and info.get("device") == "cuda":
        device = {s: sides[s].ask("device_estimate", lead_ms=timing.LEAD_FACTOR * longest) for s, _ in SIDES}
    per_call = {name: {"eager": warm[s]["eager"], "device": device[s], "host_issue": warm[s]["host_issue"]}
                for s, name in SIDES}
    k = timing.calls_per_sample_for(max(device.values()))
    launch, note = "eager", ""
    if refreshed:
        k = min(k, sets)
        note = "eager: each call's inputs or graph are put back between samples, outside the timed region"
    elif info.get("device") == "cuda" and (max(device.values()) < timing.GRAPH_BELOW_MS
                                         or timing.launch_bound(per_call)):
        launch, note, k = _graph_decision(sides, sets, k)
    lead = timing.LEAD_FACTOR * longest * k if launch == "eager" else 0.0
    times = _pairs(sides, settings, settings.timing_budget_s / timed_shapes, k, lead, settle, progress, shape)
    result = {"baseline_ms": times["b"], "candidate_ms": times["c"], "calls_per_sample": k, "mode": launch,
              "mode_note": note, "stop_reason": times["stop_reason"], "per_call_ms": per_call,
              "conditions": {name: summarize(times["readings"][s]) for s, name in SIDES},
              # Each sample's figure is net of its own host's share, measured right after it (wire.sample.host_tail):
              # two processes' hosts differ.
              "busy_after_ms": {name: paired_times.upper_quartile(times["after"][s]) for s, name in SIDES},
              "host_tail_ms": {name: paired_times.upper_quartile(times["tail"][s]) for s, name in SIDES},
              "busy_before_ms": {name: paired_times.upper_quartile(times["before"][s]) for s, name in SIDES}}
    if timed_shapes > 1 and result["stop_reason"].startswith("time budget"):
        result["stop_reason"] += f" (this shape set's share of {settings.timing_budget_s:g} s)"
    try:
        paired_times.check_no_hidden_work(result["busy_before_ms"], result["busy_after_ms"],
                                    paired_times.upper_quartile(times["c"]) * k)
    except Exception as exc:  # noqa: BLE001 - timing's CheckFailure: the candidate's verdict, not the parent's crash
        raise HiddenWork(str(exc)) from None
    result["wall_s"] = time.monotonic() - started
    return result


def _graph_decision(sides: dict[str, RemoteSide], sets: int, eager_k: int) -> tuple[str, str, int]:
    """(launch, note, calls a sample): both sides replayed from their own graphs, or both eager where either's
    capture fails. Graphs of two processes cannot share output memory (graphs.capture_graphs does so in one)."""
    from kforge_bot.evaluate.wire import timing

    why = {s: str(sides[s].ask("capture") or "") for s, _ in SIDES}
    failed = next((w for w in why.values() if w), "")
    if failed:
        for s, _ in SIDES:
            if not why[s]:
                sides[s].ask("drop_graphs")
        return "eager", f"eager: graph capture failed ({failed})", eager_k
    replayed = max(float(sides[s].ask("replayed_estimate")) for s, _ in SIDES)
    note = "each side's graphs replay in its own worker's memory"
    return "cuda_graph", note, min(timing.calls_per_sample_for(replayed), sets)


def _pairs(sides: dict[str, RemoteSide], settings: EvalSettings, budget_s: float, k: int, lead: float,
           settle: dict[str, float], progress: Callable[[dict[str, Any]], None] | None,
           shape: int) -> dict[str, Any]:
    """The timed pairs, in alternating order, with measure_pair's stop rule; every figure as the sides sent it."""
    from kforge_bot.evaluate.wire import timing

    got: dict[str, Any] = {"b": [], "c": [], "readings": {"b": [], "c": []}, "after": {"b": [], "c": []},
                           "before": {"b": [], "c": []}, "tail": {"b": [], "c": []}}
    budget_end = time.monotonic() + budget_s
    pair = 0
    while True:
        for s in ("b", "c") if pair % 2 == 0 else ("c", "b"):
            figures = sides[s].ask("sample", pair=pair, k=k, lead_ms=lead, settle=settle)
            got[s].append(float(figures["ms"]))
            got["readings"][s].append(figures.get("reading") or {})
            got["after"][s].append(float(figures.get("busy_after_ms") or 0.0))
            got["before"][s].append(float(figures.get("busy_before_ms") or 0.0))
            got["tail"][s].append(float(figures.get("host_tail_ms") or 0.0))
        pair += 1
        now = time.monotonic()
        if pair >= settings.min_pairs and (pair % 5 == 0 or pair >= settings.max_pairs or now >= budget_end):
            speedup, ci = speedup_from_pairs(got["b"], got["c"], settings.confidence)
            if progress is not None:
                progress({"type": "progress", "phase": "timing", "shape": shape, "pairs": pair, "speedup": speedup,
                          "ci": list(ci) if ci else None})
            if relative_half_width(ci, speedup) <= settings.target_precision:
                got["stop_reason"] = f"confidence interval within +-{settings.target_precision:.1%}"
                return got
        got["stop_reason"] = timing.stop_reason(pair, now, budget_end, budget_s, settings.min_pairs,
                                                settings.max_pairs)
        if got["stop_reason"]:
            return got

