"""The built-in tuner as the loop's proposer (no LLM endpoint configured)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kforge_bot.errors import SearchExhausted
from kforge_bot.optimize.protocols import TUNER, Exchange, Proposal, RunView
from kforge_bot.optimize.record import IterationRecord, tuner_score
from kforge_bot.kernelspec import KernelSpec
from kforge_bot.tuner import search as tuner
from kforge_bot.tuner import tunables


class TunerProposer:
    """The built-in tuner as a proposer: every candidate is the ORIGINAL source with new parameter values."""

    kind = TUNER

    def __init__(self, spec: KernelSpec, *, cpu_count: int | None = None, min_gain: float = 0.01) -> None:
        self.spec = spec
        self.original = spec.baseline.source
        self.tunables = tunables.find_tunables(self.original, spec.language, path=str(spec.kernel_path),
                                               cpu_count=cpu_count)
        self.current = tunables.current_assignment(self.tunables)
        self.min_gain = min_gain
        self.search: tuner.TunerSearch | None = None

    def describe(self) -> dict[str, Any]:
        return {"generator": "built-in tuner", "tunables": [t.describe() for t in self.tunables]}

    def prepare(self) -> Exchange:
        return Exchange()  # the tuner asks no one: nothing can fail before the kernel is measured

    def propose(self, view: RunView) -> Exchange:
        """Slot 0: the coordinate descent's next step; other slots: `_distinct`. The tuner asks no one, so the
        exchange holds no events."""
        assert self.search is not None
        if view.slot:
            return Exchange(proposal=self._distinct(self.search, view))
        assignment = self.search.propose()
        if assignment is None:
            return Exchange(signal=SearchExhausted("the tuner tried every neighbouring value of every parameter, and "
                                                   "joint moves of several, without further gain"))
        return Exchange(proposal=self._proposal(assignment))

    def observe(self, view: RunView, judged: Sequence[IterationRecord]) -> Exchange:
        """Nothing judged yet: find the search's start (a resumed run replays the results, so nothing is proposed
        twice). Then each judged candidate's score feeds the search."""
        if self.search is None:
            return self._start(view)
        for it in judged:
            if it.assignment is not None and it.result is not None:
                self.search.record(it.assignment, tuner_score(it.result))
        return Exchange()

    def _start(self, view: RunView) -> Exchange:
        out = Exchange()
        if not view.record.tunables and self.tunables:
            out.report("tunables", tunables=[t.describe() for t in self.tunables])
        if not self.tunables:
            out.signal = SearchExhausted(
                f"the tuner found no tunable parameters in {self.spec.kernel_file} (UPPER_CASE block/tile/warp/"
                "thread constants, num_warps=, #define or constexpr values, launch shapes); mark one with "
                "'# kforge: tune NAME in [a, b, c]' or configure an LLM endpoint")
            return out
        self.search = tuner.TunerSearch(self.tunables, hint=tuner.profile_hint(view.digest(0)), min_gain=self.min_gain)
        for assignment, score in view.record.tuner_results():
            self.search.record(assignment, score)
        return out

    def _distinct(self, search: tuner.TunerSearch, view: RunView) -> Proposal | None:
        """Another slot of a round: untried neighbours (one step of one parameter) of the beam's assignments, best
        first, then joint moves from the best; their results feed the descent, which never proposes a measured
        assignment again. None: nothing distinct left."""
        seen = {tuple(sorted(k)) for k in search.results} | {tuple(sorted(a.items())) for a in view.taken}
        parents = [it.assignment for it in view.record.beam(view.beam) if it.assignment]
        parents.append(search.best[0])
        for parent in parents:
            for t, first in search.order():
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
        for trial in tuner.joint_moves(self.tunables, search.best[0], hint=search.hint, seed=search.seed,
                                       limit=search.max_joint):
            if tuple(sorted(trial.items())) not in seen:  # single moves all taken: joint ones fill the round
                return self._proposal(trial)
        return None

    def _proposal(self, assignment: dict[str, int]) -> Proposal:
        source = tunables.apply(self.original, assignment, self.spec.language)
        change = ", ".join(f"{k} {tunables.value_text(self.current[k])}->{tunables.value_text(v)}"
                           for k, v in assignment.items() if v != self.current[k])
        return Proposal(source=source, change=change or "as written", assignment=assignment)
