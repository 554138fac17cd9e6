"""A worker's side of a timed pair when base and head each have a process of their own: the parent asks, it answers.

The parent (kforge_bot.evaluate.pair_driver) runs the interleaved schedule measure_pair runs in one process: the
warm-up, the device estimates, the graph decision, then one timed sample at a time in the alternating order. Each
request is one JSON line on the worker's stdin; each answer goes back over the worker's channel as a progress
message of phase "side". Everything a sample does in measure_pair happens here, around this side's own calls only:
fresh input storage before an eager sample, the conditions read around it, the device's settle and lead, the
checks and the poisoning after it, and the refresh. The side never learns the other side's figures; a request it
cannot read, or a failure in its call, ends the worker (its Stop), which the parent charges to this side.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from kforge_bot.evaluate.wire import conditions, timing
from kforge_bot.evaluate.wire.sample import timed_sample
from kforge_bot.evaluate.wire.graphs import GraphReplays, capture_graphs
from kforge_bot.evaluate.worker.worker_io import Channel, Stop, read_control_line
from kforge_bot.targets.base import Target

Call = Callable[[list[Any]], Any]


class SideTimer:
    """One side's timed calls on one shape set (or one direction of it), in the process that holds that side.

    `after(out, index)` runs on every timed call's output outside the timed region (the role keeps a copy and
    poisons it); `after_sample()` once after each sample, before those (the role's per-sample guards);
    `refresh()` after each sample and its callbacks (in-place inputs put back, a backward's graphs rebuilt);
    `fresh_inputs(sets)` before each eager sample (new storage for the sets it calls)."""

    def __init__(self, target: Target, fn: Call, input_sets: list[list[Any]], after: Callable[[Any, int], None], *,
                 after_sample: Callable[[], None], refresh: Callable[[], None] | None = None,
                 fresh_inputs: Callable[[list[int]], None] | None = None, tolerance: dict[str, float] | None = None,
                 heartbeat: Callable[[int], None] | None = None) -> None:
        self.target, self.fn, self.sets = target, fn, input_sets
        self.after, self.after_sample, self.refresh = after, after_sample, refresh
        self.fresh_inputs, self.heartbeat = fresh_inputs, heartbeat
        self.repeats = timing.RepeatCheck(tolerance)
        self.gauge = conditions.Gauge(conditions.NvmlClocks.open(target.kind, getattr(target, "index", 0)),
                                      waits=target.kind == "cpu")
        self.replays: GraphReplays | None = None  # this side's graphs, where the parent chose to replay them
        self.calls_per_sample = 1
        self.eager_ms = 0.0

    def after_single_call(self, out: Any, index: int) -> None:  # warm-up and estimate: every call is a sample
        self.after_sample()
        self.after(out, index)

    def warm_up(self, warmup_ms: float) -> dict[str, float]:
        refresh = self.refresh
        self.eager_ms, host = timing.warm_up_side(self.target, self.fn, self.sets, warmup_ms, self.after_single_call,
                                                  self.heartbeat, refresh)
        return {"eager": self.eager_ms, "host_issue": host}

    def device_estimate(self, lead_ms: float) -> float:
        """This side's device time a call behind a lead (timing._device_estimate), on an asynchronous device."""
        if self.target.kind != "cuda":
            return self.eager_ms
        return timing.median_ms_per_side(self.target, (self.fn,), self.sets, (self.after_single_call,),
                                         lead_ms=lead_ms, heartbeat=self.heartbeat)[0]

    def capture(self) -> str:
        """This side's CUDA graphs, one per input set, proven as graphs.capture_graphs proves them; "" where they
        hold, else why not (the parent then keeps both sides eager)."""
        captured = capture_graphs(self.target, (self.fn,), self.sets)
        if isinstance(captured, str):
            return captured or "capture failed"
        replays = captured[0][0]
        self.replays = replays if isinstance(replays, GraphReplays) else None
        return ""

    def drop_graphs(self) -> None:
        self.replays = None

    def replayed_estimate(self) -> float:
        assert self.replays is not None, "capture first"
        estimate = timing.slowest_median_ms(self.target, (self.replays,), self.sets, (self.after_single_call,))
        self.replays.poison_outputs()  # the first sample starts from poison too
        return estimate

    def sample(self, pair: int, k: int, lead_ms: float, settle: dict[str, float] | None = None) -> dict[str, Any]:
        """One timed sample of `k` calls, as measure_pair times a side's sample, and its figures. `settle`: the
        figures its settle plans with (the base worker's, which the parent hands to both sides)."""
        self.calls_per_sample = k
        fn: Call = self.replays if self.replays is not None else self.fn
        outs: list[Any] = []
        calls = timing.sample_sets(pair, k, len(self.sets))
        if self.replays is None and self.fresh_inputs is not None:
            self.fresh_inputs(sorted(set(calls)))
        self.gauge.begin()
        sample = timed_sample(self.target, fn, self.sets, calls, lead_ms, outs, settle)
        reading = self.gauge.take()
        self.after_sample()
        if self.replays is not None:  # a replayed graph's outputs are its last replay's
            calls = sorted(set(calls))
            outs = [self.replays.output(self.sets[j]) for j in calls]
        for j, out in zip(calls, outs):
            self.repeats(out, j)
            self.after(out, j)
        if self.replays is not None:
            self.replays.poison_outputs()
        figures = {"ms": sample.ms, "busy_after_ms": sample.busy_after_ms, "busy_before_ms": sample.busy_before_ms,
                   "host_tail_ms": sample.host_tail_ms, "reading": reading}
        del outs, sample
        if self.refresh is not None:
            self.refresh()
        return figures


def serve(timer: SideTimer, channel: Channel, session: str, info: dict[str, Any]) -> None:
    """Answer the parent's requests for `session` ("<shape set>:<direction>") until it closes it. `info` tells the
    parent what it needs to plan the schedule (the device's kind, the timed sets, whether calls are refreshed)."""
    channel.send("progress", phase="side", op="open", session=session, **info)
    while True:
        line = read_control_line()
        try:
            request = json.loads(line)
            op = str(request["op"])
        except (ValueError, KeyError, TypeError):
            raise Stop("rejected", "the harness's request line was unreadable (consumed by the kernel?)") from None
        if op == "close":
            return
        channel.send("progress", phase="side", op=op, value=_answer(timer, op, request))


def _answer(timer: SideTimer, op: str, request: dict[str, Any]) -> Any:
    if op == "warm_up":
        return timer.warm_up(float(request["warmup_ms"]))
    if op == "device_estimate":
        return timer.device_estimate(float(request["lead_ms"]))
    if op == "capture":
        return timer.capture()
    if op == "drop_graphs":
        return timer.drop_graphs()
    if op == "replayed_estimate":
        return timer.replayed_estimate()
    if op == "sample":
        settle = request.get("settle")
        return timer.sample(int(request["pair"]), int(request["k"]), float(request["lead_ms"]),
                            settle if isinstance(settle, dict) else None)
    raise Stop("rejected", f"the harness sent an unknown request {op[:40]!r}")
