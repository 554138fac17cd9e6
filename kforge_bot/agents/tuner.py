"""The built-in tuner: the generator's stand-in when no LLM endpoint is configured.

It searches a kernel's own tunable parameters (kforge_bot.agents.tunables finds and rewrites them) by
coordinate descent, in an order guided by the profile (`profile_hint`).

Pure: no torch, no imports of the kernel.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from kforge_bot.agents.tunables import Tunable, current_assignment
from kforge_bot.evaluate import ncu_parse

# ---------------------------------------------------------------------------------------------------
# Profile hint.


def _number(d: Any, *names: str) -> float | None:
    if not isinstance(d, Mapping):
        return None
    for n in names:
        v = d.get(n)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def profile_hint(digest: Mapping[str, Any] | None) -> str | None:
    """'memory', 'compute', 'launch', 'registers' or 'occupancy' from a profile digest, or None when it says
    too little.

    The hardware's own counters come first when the digest has them (the collector's ncu rows, longest
    kernel): spills, or occupancy capped by registers below half, -> 'registers' (more warps, smaller
    blocks); under-occupied (ncu_parse.classify) -> 'occupancy' (smaller blocks, more of them); else the
    class they imply. Otherwise (whichever are present): roofline.bound ("memory"/"compute"; "unknown" is
    ignored); a device time per call (device_us) under 20 us (launch-bound); ncu DRAM vs SM throughput;
    roofline arithmetic_intensity vs ridge_intensity."""
    if not digest:
        return None
    counted = _counter_hint(digest.get("ncu"))
    if counted is not None:
        return counted
    roof = digest.get("roofline") or {}
    bound = str(roof.get("bound") or digest.get("bound") or "").lower()
    if bound.startswith("mem"):
        return "memory"
    if bound.startswith("comp"):
        return "compute"
    if bound.startswith(("launch", "latency", "overhead")):
        return "launch"
    time_us = _number(digest, "device_us", "total_time_us", "time_us")
    if time_us is None:
        ms = _number(digest, "total_time_ms", "time_ms")
        time_us = ms * 1000.0 if ms is not None else None
    if time_us is not None and time_us < 20.0:
        return "launch"
    ncu = digest.get("ncu") or {}
    if isinstance(ncu, Mapping) and ncu and all(isinstance(v, Mapping) for v in ncu.values()):
        ncu = max(ncu.values(), key=lambda m: _number(m, "duration_us", "time_us") or 0.0)  # the longest kernel
    if isinstance(ncu, Sequence) and not isinstance(ncu, str) and ncu:
        ncu = max(ncu, key=lambda m: _number(m, "duration_us", "time_us") or 0.0)
    dram = _number(ncu, "dram_throughput_pct", "memory_throughput_pct", "dram_pct")
    sm = _number(ncu, "sm_throughput_pct", "compute_throughput_pct", "sm_pct")
    if dram is not None and sm is not None:
        return "memory" if dram >= sm else "compute"
    intensity = _number(roof, "arithmetic_intensity")
    ridge = _number(roof, "ridge_intensity")
    if intensity is not None and ridge:
        return "memory" if intensity < ridge else "compute"
    return None


def _counter_hint(rows: Any) -> str | None:
    if not (isinstance(rows, Sequence) and not isinstance(rows, str) and rows
            and all(isinstance(r, Mapping) and "duration_us" in r for r in rows)):
        return None
    top = max(rows, key=lambda r: _number(r, "duration_us") or 0.0)
    occupancy = _number(top, "achieved_occupancy_pct")
    if (_number(top, "spills") or 0.0) > 0 or (top.get("occupancy_limiter") == "registers"
                                               and occupancy is not None and occupancy < 50.0):
        return "registers"
    return {"under-occupied": "occupancy", "memory-bound": "memory", "compute-bound": "compute",
            "latency-bound": "launch"}.get(ncu_parse.classify(dict(top)))


# ---------------------------------------------------------------------------------------------------
# Search.

# Per hint: kinds in visiting order, and the direction (+1 larger, -1 smaller) to try first.
_PLANS: dict[str | None, list[tuple[str, int]]] = {
    None: [("threads", 1), ("warps", 1), ("block", 1), ("tile", 1), ("gpu_threads", 1), ("stages", 1), ("small", 1), ("int", 1)],
    "memory": [("block", 1), ("tile", 1), ("gpu_threads", 1), ("warps", 1), ("threads", 1), ("small", 1), ("stages", 1), ("int", 1)],
    "launch": [("block", 1), ("tile", 1), ("gpu_threads", 1), ("threads", -1), ("warps", 1), ("small", 1), ("stages", -1), ("int", 1)],
    "compute": [("stages", 1), ("tile", 1), ("block", 1), ("warps", 1), ("gpu_threads", 1), ("small", 1), ("threads", 1), ("int", 1)],
    # Registers cap occupancy (or spill): spread a block over more warps, or give each thread less to hold.
    "registers": [("warps", 1), ("block", -1), ("tile", -1), ("stages", -1), ("gpu_threads", 1), ("threads", 1), ("small", 1), ("int", 1)],
    # Too few warps resident or under one wave of blocks: more, smaller blocks.
    "occupancy": [("block", -1), ("tile", -1), ("gpu_threads", -1), ("warps", 1), ("stages", -1), ("threads", 1), ("small", 1), ("int", 1)],
}


def _key(assignment: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(assignment.items()))


class TunerSearch:
    """Coordinate descent over tunables from the current values, one parameter at a time.

    For each parameter (in an order set by the profile hint), step to the neighbouring candidate in the
    preferred direction while the score improves by more than `min_gain`; if the first step fails, try
    the other direction. Passes repeat until one changes nothing (or `max_passes`). A score is
    "higher is better" (the speedup over the baseline); None marks a failed candidate.

        search = TunerSearch(tunables, hint=profile_hint(digest))
        while not search.done():
            assignment = search.propose()
            search.record(assignment, speedup_or_None)
        best_assignment, best_speedup = search.best

    The current values count as tried with `baseline_score` (1.0: the baseline itself); pass None to
    have them proposed and measured first. Nothing is ever proposed twice. To resume, `record` the
    earlier results before the first `propose`: the plan replays through them without proposing any.
    """

    def __init__(
        self,
        tunables: Sequence[Tunable],
        current: Mapping[str, int] | None = None,
        *,
        hint: str | None = None,
        min_gain: float = 0.01,
        max_trials: int | None = None,
        max_passes: int = 3,
        baseline_score: float | None = 1.0,
    ):
        self.tunables = list(tunables)
        self.current = dict(current) if current is not None else current_assignment(self.tunables)
        missing = [t.name for t in self.tunables if t.name not in self.current]
        if missing:
            raise KeyError(f"current values missing for {missing}")
        self.hint = hint
        self.min_gain = min_gain
        self.max_trials = max_trials
        self.max_passes = max_passes
        self.results: dict[tuple[tuple[str, int], ...], float | None] = {}
        self.history: list[tuple[dict[str, int], float | None]] = []
        self.proposed = 0
        if baseline_score is not None:
            self.results[_key(self.current)] = baseline_score
        self._best: tuple[dict[str, int], float | None] = (dict(self.current), baseline_score)
        self._pending: dict[str, int] | None = None
        self._lookahead: dict[str, int] | None = None
        self._exhausted = False
        self._plan = self._walk()

    # The order the parameters are visited in, with the first direction for each.
    def order(self) -> list[tuple[Tunable, int]]:
        plan = _PLANS.get(self.hint, _PLANS[None])
        rank = {kind: (i, d) for i, (kind, d) in enumerate(plan)}
        indexed = list(enumerate(self.tunables))
        indexed.sort(key=lambda it: (not it[1].marked, rank.get(it[1].kind, (len(plan), 1))[0], it[0]))
        return [(t, rank.get(t.kind, (0, 1))[1]) for _, t in indexed]

    @property
    def best(self) -> tuple[dict[str, int], float | None]:
        return dict(self._best[0]), self._best[1]

    def record(self, assignment: Mapping[str, int], score: float | None) -> None:
        key = _key(assignment)
        self.results[key] = score
        self.history.append((dict(assignment), score))
        if self._pending is not None and _key(self._pending) == key:
            self._pending = None
        # The same acceptance rule as the descent: a gain within min_gain is noise, not progress.
        if score is not None and (self._best[1] is None or score > self._best[1] * (1.0 + self.min_gain)):
            self._best = (dict(assignment), score)

    def done(self) -> bool:
        if self._pending is not None:
            return False
        if self.max_trials is not None and self.proposed >= self.max_trials:
            return True
        self._peek()
        return self._exhausted

    def propose(self) -> dict[str, int] | None:
        """The next assignment to measure (all parameters), or None when the search is over."""
        if self._pending is not None:
            raise RuntimeError("record the result of the previous proposal before asking for another")
        if self.done():
            return None
        proposal, self._lookahead = self._lookahead, None
        assert proposal is not None
        self._pending = proposal
        self.proposed += 1
        return dict(proposal)

    def _peek(self) -> None:
        if self._lookahead is None and not self._exhausted:
            try:
                self._lookahead = next(self._plan)
            except StopIteration:
                self._exhausted = True

    def _ask(self, trial: dict[str, int]) -> Generator[dict[str, int], None, float | None]:
        key = _key(trial)
        if key not in self.results:
            yield trial
        return self.results.get(key)

    def _walk(self) -> Generator[dict[str, int], None, None]:
        best = dict(self.current)
        best_score = yield from self._ask(best)
        for _ in range(self.max_passes):
            improved = False
            for t, first in self.order():
                if len(t.candidates) < 2:
                    continue
                for direction in (first, -first):
                    moved = False
                    values = list(t.candidates)
                    idx = values.index(best[t.name]) if best[t.name] in values else _nearest(values, best[t.name])
                    while 0 <= idx + direction < len(values):
                        idx += direction
                        trial = {**best, t.name: values[idx]}
                        score = yield from self._ask(trial)
                        if score is not None and (best_score is None or score > best_score * (1.0 + self.min_gain)):
                            best, best_score, moved, improved = trial, score, True, True
                        else:
                            break
                    if moved:
                        break  # the first direction paid off: the other side is not worth a look
            if not improved:
                break


def _nearest(values: list[int], value: int) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - value))
