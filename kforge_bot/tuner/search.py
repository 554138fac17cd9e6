"""The built-in tuner: the generator's stand-in when no LLM endpoint is configured.

It searches a kernel's own tunable parameters (kforge_bot.tuner.tunables finds and rewrites them) by
coordinate descent, in an order guided by the profile (`profile_hint`); where every single-parameter move
loses, it tries joint moves (`joint_moves`: an autotune list pinned to one of its configurations, tiles with
stages and warps together, pairs), within a budget and in an order fixed by a seed.

Pure: no torch, no imports of the kernel.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any

from kforge_bot.counters import ncu_parse
from kforge_bot.tuner.tunables import Tunable, current_assignment

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
    """Coordinate descent over tunables from the current values, one parameter at a time, then joint moves.

    For each parameter (in an order set by the profile hint), step to the neighbouring candidate in the
    preferred direction while the score improves by more than `min_gain`; if the first step fails, try
    the other direction. After each parameter that does not move, and once a pass changes nothing, joint
    moves (`joint_moves`, shuffled by `seed`; at most `max_joint` a pass) are tried from the best; one that
    pays is taken and descent goes on from it. At most `max_passes` passes. A score is
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
        max_joint: int = 32,
        seed: int = 0,
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
        self.max_joint = max_joint  # joint moves tried per pass, at most
        self.seed = seed
        self._joint_used = 0
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
        passes = 0
        while passes < self.max_passes:
            passes += 1
            self._joint_used = 0
            best, best_score, improved = yield from self._descend(best, best_score)
            if improved:
                continue
            # Every single-parameter move lost: try moves of several parameters at once before giving up.
            best, best_score, jumped = yield from self._jump(best, best_score)
            if not jumped:
                break

    def _better(self, score: float | None, best_score: float | None) -> bool:
        return score is not None and (best_score is None or score > best_score * (1.0 + self.min_gain))

    def _descend(self, best: dict[str, int], best_score: float | None
                 ) -> Generator[dict[str, int], None, tuple[dict[str, int], float | None, bool]]:
        """One coordinate-descent pass: each parameter stepped while it pays, in the hint's order. After each
        parameter that did not move, the next joint move is tried: a loop that stops after a few losing
        candidates in a row (its patience) must meet one before it gives up on a kernel where only joint moves
        pay."""
        improved = False
        joint = iter(self._joint_list(best))
        for t, first in self.order():
            if len(t.candidates) < 2:
                continue
            moved = False
            for direction in (first, -first):
                values = list(t.candidates)
                idx = values.index(best[t.name]) if best[t.name] in values else _nearest(values, best[t.name])
                while 0 <= idx + direction < len(values):
                    idx += direction
                    trial = {**best, t.name: values[idx]}
                    score = yield from self._ask(trial)
                    if self._better(score, best_score):
                        best, best_score, moved, improved = trial, score, True, True
                    else:
                        break
                if moved:
                    break  # the first direction paid off: the other side is not worth a look
            if moved:
                joint = iter(self._joint_list(best))
                continue
            trial = next(joint, None)
            if trial is not None and self._joint_used < self.max_joint:
                self._joint_used += 1
                score = yield from self._ask(trial)
                if self._better(score, best_score):
                    best, best_score, improved = trial, score, True
                    joint = iter(self._joint_list(best))
        return best, best_score, improved

    def _joint_list(self, best: dict[str, int]) -> list[dict[str, int]]:
        return joint_moves(self.tunables, best, hint=self.hint, seed=self.seed, limit=self.max_joint,
                           tried=self.results)

    def _jump(self, best: dict[str, int], best_score: float | None
              ) -> Generator[dict[str, int], None, tuple[dict[str, int], float | None, bool]]:
        """The rest of the joint moves from the best assignment, within `max_joint` a pass; the first that pays
        is taken."""
        for trial in self._joint_list(best):
            if self._joint_used >= self.max_joint:
                break
            self._joint_used += 1
            score = yield from self._ask(trial)
            if self._better(score, best_score):
                return trial, score, True
        return best, best_score, False


# ---------------------------------------------------------------------------------------------------
# Joint moves.

_SIZE_KINDS = ("tile", "block", "gpu_threads")
_AXES = (_SIZE_KINDS, ("stages",), ("warps",))  # what grows together: tile sides, pipelining, warps


def _step(t: Tunable, value: int, direction: int) -> int | None:
    values = list(t.candidates)
    idx = values.index(value) if value in values else _nearest(values, value)
    j = idx + direction
    return values[j] if 0 <= j < len(values) else None


def _config_of(t: Tunable) -> str:
    """The configuration a tunable belongs to: one `triton.Config` of an autotune list, else its group (a
    launch helper), else the file."""
    head, _, _ = t.name.partition("].")
    if t.origin == "autotune" and head.startswith("autotune["):
        return f"{t.group}/{head}]"
    return t.group or "file"


def joint_moves(tunables: Sequence[Tunable], best: Mapping[str, int], *, hint: str | None = None, seed: int = 0,
                limit: int = 32, tried: Mapping[tuple[tuple[str, int], ...], Any] | None = None
                ) -> list[dict[str, int]]:
    """Assignments that move several parameters at once from `best`, in the order to try them, at most `limit`,
    none already in `tried`. Deterministic for a seed.

    1. Pins: every `triton.Config` of an autotune list set to one of them (each in turn), so the autotuner has
       one choice: the configuration the search measured, checked like any other candidate.
    2. Axis moves per configuration: its tile sides, its stages and its warps stepped together, every
       combination of two or three axes and directions (larger tiles with more stages and warps first, or
       smaller first when the profile says registers or occupancy limit).
    3. Pairs of parameters, each one step either way, in an order shuffled by `seed`.
    """
    seen: set[tuple[tuple[str, int], ...]] = set(tried or {})
    out: list[dict[str, int]] = []
    configs: dict[str, list[Tunable]] = {}
    for t in tunables:
        configs.setdefault(_config_of(t), []).append(t)
    trials = itertools.chain(_pin_moves(configs, best), _axis_moves(configs, best, hint),
                             _pair_moves(tunables, best, seed))
    for trial in trials:
        key = _key(trial)
        if key not in seen and trial != dict(best):
            seen.add(key)
            out.append(trial)
        if len(out) >= limit:
            break  # the rest (pairs, lazily) would be cut off anyway
    return out[:limit]


def _pin_moves(configs: Mapping[str, list[Tunable]], best: Mapping[str, int]) -> Iterator[dict[str, int]]:
    """Each autotune list with every `triton.Config` of it set to one of them, in turn (a config whose fields
    differ from the chosen one's is left as it is)."""
    lists: dict[str, list[str]] = {}
    for config in configs:
        if config.startswith("configs@") and "/" in config:
            lists.setdefault(config.split("/")[0], []).append(config)
    for members in lists.values():
        fields = {c: {t.name.partition("].")[2]: t for t in configs[c]} for c in members}
        for source in members:
            trial = dict(best)
            for target in members:
                if set(fields[target]) != set(fields[source]):
                    continue
                for name, t in fields[target].items():
                    trial[t.name] = best[fields[source][name].name]
            yield trial


def _axis_moves(configs: Mapping[str, list[Tunable]], best: Mapping[str, int], hint: str | None
                ) -> Iterator[dict[str, int]]:
    """Per direction vector over the axes (two or three of them moving), each configuration with its
    parameters on those axes stepped together; only trials where at least two axes moved."""
    shrink_first = hint in ("registers", "occupancy")
    vectors = [v for v in itertools.product((1, -1, 0), repeat=len(_AXES)) if sum(1 for d in v if d) >= 2]
    vectors.sort(key=lambda v: (sum(v) if shrink_first else -sum(v), v.count(0)))
    for vector in vectors:
        for members in configs.values():
            trial = dict(best)
            moved_axes = 0
            for axis, direction in zip(_AXES, vector, strict=True):
                if not direction:
                    continue
                moved = False
                for t in members:
                    if t.kind in axis:
                        value = _step(t, trial[t.name], direction)
                        if value is not None:
                            trial[t.name], moved = value, True
                moved_axes += moved
            if moved_axes >= 2:
                yield trial


def _pair_moves(tunables: Sequence[Tunable], best: Mapping[str, int], seed: int) -> Iterator[dict[str, int]]:
    """Two parameters, each one step either way, in an order shuffled by the seed."""
    movable = [t for t in tunables if len(t.candidates) > 1]
    pairs = [(a, b, da, db) for a, b in itertools.combinations(movable, 2) for da in (1, -1) for db in (1, -1)]
    random.Random(seed).shuffle(pairs)
    for a, b, da, db in pairs:
        va, vb = _step(a, best[a.name], da), _step(b, best[b.name], db)
        if va is not None and vb is not None:
            yield {**best, a.name: va, b.name: vb}


def _nearest(values: list[int], value: int) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - value))
