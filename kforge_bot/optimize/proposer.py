"""What the loop asks of a proposer, and what a proposer tells the loop back.

One way: the loop calls a proposer with what it may read of the run (a `RunView`), and the proposer answers;
it never holds the loop and never writes the trajectory. Every call is a generator that yields the events to
record as they happen (an LLM prompt before the request, its reply after it) and returns its answer (a
`Proposal`, or nothing). The loop writes each event the moment it is yielded, so the trajectory's events,
their order and their times are those of the exchange itself, and a run stopped during a model call (Ctrl-C,
a kill) still has the prompt on disk.

`Proposer` lists every call the loop makes, with the defaults of a proposer that has nothing to say there;
the tuner (kforge_bot.optimize.tuner_proposer) and the LLM (kforge_bot.optimize.llm_proposer) override what
they need.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from kforge_bot.optimize.digest import profile_digest
from kforge_bot.optimize.record import IterationRecord, RunRecord

# The two kinds of proposer (the start event records which one a run has, under "mode").
TUNER = "tuner"
LLM = "llm"

T = TypeVar("T")


@dataclass(frozen=True)
class Event:
    """One trajectory event a proposer reports (kforge_bot.optimize.trajectory lists the kinds)."""

    kind: str
    fields: dict[str, Any]


# A proposer call: the events to record, as they happen, then its answer.
Steps = Generator[Event, None, T]


@dataclass
class Proposal:
    source: str
    change: str = ""
    assignment: dict[str, int] | None = None
    parent: int | None = None  # the iteration it started from (0: the kernel as written)
    model: str | None = None


@dataclass(frozen=True)
class RunView:
    """What a proposer may read of the run: its record, its sources, what the agents are told of the device,
    and the shape of a parallel round (candidates per round, parents carried forward)."""

    record: RunRecord
    hardware_text: str
    parallel: int
    beam: int
    baseline_source: str
    read_source: Callable[[str], str]  # a path the record names, relative to the report folder -> its text

    def source_of(self, iteration: int) -> str:
        """The source of a candidate; the kernel as written for 0 (or an iteration with no file)."""
        it = self.record.iterations.get(iteration)
        return self.read_source(it.file) if iteration and it and it.file else self.baseline_source

    def best_source(self) -> str:
        best = self.record.best
        return self.source_of(best.iteration) if best is not None else self.baseline_source

    def digest(self, iteration: int) -> dict[str, Any]:
        return profile_digest(self.record, iteration)


class Proposer(ABC):
    """Every call the loop makes of a proposer, in the order of a run: describe (for the start event),
    prepare (before the baseline is measured), start (after it), then per round (a sequential step is a round of
    one) `propose_for` for each of its slots and `observe_round` once its candidates are judged. A proposer that
    thinks one candidate at a time says only `propose` and `observe`: the defaults of the round's calls ask them."""

    kind: ClassVar[str]  # TUNER or LLM

    def describe(self) -> dict[str, Any]:
        """What the start event records of this proposer (endpoint, model, ...)."""
        return {}

    def prepare(self) -> Steps[None]:
        """Anything that can fail fast, before minutes of evaluation."""
        yield from ()

    def start(self, view: RunView) -> Steps[None]:
        """The baseline is measured: get ready to propose (a resumed run replays what it needs from the record)."""
        yield from ()

    @abstractmethod
    def propose(self, iteration: int, view: RunView) -> Steps[Proposal]:
        """The next candidate, from the current best. NonTerminating: this iteration is spent on nothing;
        Terminating: the run ends."""

    def propose_for(self, iteration: int, slot: int, taken: Sequence[dict[str, int]],
                    view: RunView) -> Steps[Proposal | None]:
        """Candidate `slot` of a parallel round (`taken`: the assignments the round already holds); None when
        nothing distinct is left for this round. By default the round holds one candidate."""
        if slot == 0:
            return (yield from self.propose(iteration, view))
        return None

    def observe(self, it: IterationRecord, view: RunView) -> Steps[None]:
        """A candidate was judged (`it` is its record, accepted or not)."""
        yield from ()

    def observe_round(self, its: Sequence[IterationRecord], view: RunView) -> Steps[None]:
        """Every candidate of a parallel round was judged. By default: each one observed in turn."""
        for it in its:
            yield from self.observe(it, view)
