"""The loop's two partners and what passes between them, as data (after mini-swe-agent's passive `Model` and
`Environment`): the loop calls, a partner answers, and neither holds the other.

- A `Proposer` (kforge_bot.optimize.tuner_proposer, kforge_bot.optimize.llm_proposer) is asked to `prepare`
  before anything is measured (what can fail fast), to `propose` one candidate of a round, and to `observe` the
  run once its kernel as written is measured (nothing judged yet; a resumed run replays what it needs) and after
  each round's candidates are judged. Each call answers an `Exchange`: the events to record (its prompts,
  replies, advice, each stamped with the moment it happened), its proposal, and the signal that ended the call
  (a `NonTerminating` one spends the iteration, a `Terminating` one ends the run). The loop writes the events,
  then acts on the signal: it is the trajectory's only writer. Interrupted (Ctrl-C) during a model request, a
  proposer hands over what it had reported with the interrupt (`Interrupted`); a run killed outright during one
  keeps none of that request's events, and its iteration is asked again on resume.
- An `Evaluator` (kforge_bot.optimize.evaluator.HarnessEvaluator) measures an implementation: `submit` answers a
  future of a `Measured`, done at once where nothing runs in the background.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from kforge_bot.errors import LoopControl
from kforge_bot.evaluate.baselines import CompiledBaseline
from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.optimize.digest import profile_digest
from kforge_bot.optimize.record import IterationRecord, RunRecord
from kforge_bot.kernelspec import Implementation

# The two kinds of proposer (the start event records which one a run has, under "mode").
TUNER = "tuner"
LLM = "llm"


@dataclass(frozen=True)
class Event:
    """One trajectory event a proposer reports (kforge_bot.optimize.trajectory lists the kinds), with the moment
    it happened: the loop writes it later, under that time."""

    kind: str
    fields: dict[str, Any]
    at: float = field(default_factory=time.time, compare=False)


@dataclass
class Proposal:
    source: str
    change: str = ""
    assignment: dict[str, int] | None = None
    parent: int | None = None  # the iteration it started from (0: the kernel as written)
    model: str | None = None


@dataclass
class Exchange:
    """What one proposer call did: the events to record, in order, its proposal (None: nothing, or nothing
    distinct left for this round), and the signal that ended it, if one did."""

    events: list[Event] = field(default_factory=list)
    proposal: Proposal | None = None
    signal: LoopControl | None = None

    def report(self, kind: str, /, **fields: Any) -> None:
        """Add an event, stamped now (its fields may include a "kind" of their own: llm_error's)."""
        self.events.append(Event(kind, fields))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a proposer call, with what the call had reported by then: the loop writes it before it stops,
    so a run interrupted during a model request still has the prompt on disk."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__()
        self.exchange = exchange


@dataclass(frozen=True)
class RunView:
    """What a proposer may read of the run: its record, its sources, what the agents are told of the device,
    the shape of a parallel round (candidates per round, parents carried forward) and, when it is asked to
    propose, which candidate: its iteration, its slot in the round, the assignments the round already holds."""

    record: RunRecord
    hardware_text: str
    parallel: int
    beam: int
    baseline_source: str
    read_source: Callable[[str], str]  # a path the record names, relative to the report folder -> its text
    iteration: int = 0
    slot: int = 0
    taken: tuple[dict[str, int], ...] = ()

    def source_of(self, iteration: int) -> str:
        """The source of a candidate; the kernel as written for 0 (or an iteration with no file)."""
        it = self.record.iterations.get(iteration)
        return self.read_source(it.file) if iteration and it and it.file else self.baseline_source

    def best_source(self) -> str:
        best = self.record.best
        return self.source_of(best.iteration) if best is not None else self.baseline_source

    def digest(self, iteration: int) -> dict[str, Any]:
        return profile_digest(self.record, iteration)


class Proposer(Protocol):
    """What the loop asks of a proposer (the module docstring gives the order)."""

    kind: str  # TUNER or LLM

    def describe(self) -> dict[str, Any]:
        """What the start event records of this proposer (endpoint, model, ...)."""
        ...

    def prepare(self) -> Exchange:
        """Anything that can fail fast, before minutes of evaluation."""
        ...

    def propose(self, view: RunView) -> Exchange:
        """Candidate `view.slot` of a round, as `view.iteration`; no proposal: nothing distinct left."""
        ...

    def observe(self, view: RunView, judged: Sequence[IterationRecord]) -> Exchange:
        """The round's candidates were judged (`judged` empty: the kernel as written was measured)."""
        ...


class Measured(NamedTuple):
    """What an evaluation came back with, and the seconds it took."""

    result: EvalResult
    eval_s: float


class Evaluator(Protocol):
    """What the loop asks of an evaluator."""

    @property
    def slots(self) -> int:
        """Evaluations that run at once."""
        ...

    def submit(self, implementation: Implementation) -> Future[Measured]:
        ...

    def compiled_baselines(self, kinds: Sequence[str]) -> dict[str, CompiledBaseline]:
        ...
