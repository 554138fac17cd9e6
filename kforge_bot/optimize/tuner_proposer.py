"""The built-in tuner as the loop's proposer (no LLM endpoint configured)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kforge_bot.agents import tunables, tuner
from kforge_bot.optimize.digest import profile_digest
from kforge_bot.optimize.proposer import TUNER, Proposal
from kforge_bot.optimize.stops import SearchExhausted
from kforge_bot.optimize.record import IterationRecord
from kforge_bot.spec import KernelSpec

if TYPE_CHECKING:  # the loop imports the proposers' protocol
    from kforge_bot.optimize.loop import Loop


class TunerProposer:
    """The built-in tuner as a proposer: every candidate is the ORIGINAL source with new parameter values."""

    mode = TUNER

    def __init__(self, spec: KernelSpec, *, cpu_count: int | None = None, min_gain: float = 0.01) -> None:
        self.spec = spec
        self.original = spec.baseline.source
        self.tunables = tunables.find_tunables(self.original, spec.language, path=str(spec.kernel_path),
                                            cpu_count=cpu_count)
        self.current = tunables.current_assignment(self.tunables)
        self.min_gain = min_gain
        self.search: tuner.TunerSearch | None = None
        self.loop: Loop | None = None

    def bind(self, loop: Loop) -> None:
        self.loop = loop

    def prepare(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"generator": "built-in tuner", "tunables": [t.describe() for t in self.tunables]}

    def start(self) -> None:
        assert self.loop is not None
        if not self.loop.record.tunables and self.tunables:
            self.loop.trajectory.append("tunables", tunables=[t.describe() for t in self.tunables])
        if not self.tunables:
            raise SearchExhausted(
                f"the tuner found no tunable parameters in {self.spec.kernel_file} (UPPER_CASE block/tile/warp/"
                "thread constants, num_warps=, #define or constexpr values, launch shapes); mark one with "
                "'# kforge: tune NAME in [a, b, c]' or configure an LLM endpoint")
        hint = tuner.profile_hint(profile_digest(self.loop.record, 0))
        self.search = tuner.TunerSearch(self.tunables, hint=hint, min_gain=self.min_gain)
        for assignment, score in self.loop.record.tuner_results():  # resume: replay, propose nothing twice
            self.search.record(assignment, score)

    def propose(self, iteration: int) -> Proposal:
        assert self.search is not None
        assignment = self.search.propose()
        if assignment is None:
            raise SearchExhausted("the tuner tried every neighbouring value of every parameter without further gain")
        source = tunables.apply(self.original, assignment, self.spec.language)
        change = ", ".join(f"{k} {self.current[k]}->{v}" for k, v in assignment.items() if v != self.current[k])
        return Proposal(source=source, change=change or "as written", assignment=assignment)

    def observe(self, it: IterationRecord) -> None:
        if self.search is not None and it.assignment is not None and it.result is not None:
            from kforge_bot.optimize.record import tuner_score

            self.search.record(it.assignment, tuner_score(it.result))

    # -- parallel rounds ------------------------------------------------------------------------

    def propose_for(self, iteration: int, slot: int, round_taken: list[dict[str, int]]) -> Proposal | None:
        """Slot 0: the coordinate descent's next step. Other slots: untried neighbours (one step of one
        parameter) of the beam's assignments, best first; their results feed the descent, which never
        proposes a measured assignment again. None: nothing distinct left for this round."""
        if slot == 0:
            return self.propose(iteration)
        assert self.search is not None and self.loop is not None
        seen = {tuple(sorted(k)) for k in self.search.results} | {tuple(sorted(a.items())) for a in round_taken}
        parents = [it.assignment for it in self.loop.record.beam(self.loop.beam) if it.assignment]
        parents.append(self.search.best[0])
        for parent in parents:
            for t, first in self.search.order():
                values = list(t.candidates)
                if len(values) < 2 or t.name not in parent:
                    continue
                idx = values.index(parent[t.name]) if parent[t.name] in values else \
                    min(range(len(values)), key=lambda i: abs(values[i] - parent[t.name]))
                for direction in (first, -first):
                    j = idx + direction
                    if not 0 <= j < len(values):
                        continue
                    trial = {**parent, t.name: values[j]}
                    if tuple(sorted(trial.items())) not in seen:
                        return self._proposal(trial)
        return None

    def _proposal(self, assignment: dict[str, int]) -> Proposal:
        source = tunables.apply(self.original, assignment, self.spec.language)
        change = ", ".join(f"{k} {self.current[k]}->{v}" for k, v in assignment.items() if v != self.current[k])
        return Proposal(source=source, change=change or "as written", assignment=assignment)

    def observe_round(self, its: list[IterationRecord]) -> None:
        for it in its:
            self.observe(it)

