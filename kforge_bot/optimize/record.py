"""The state of a run, folded from its trajectory's events (kforge_bot.optimize.trajectory): `RunRecord.apply`
takes one event at a time, as it is appended or as a resumed run replays the file, so both reach the same state.
Each line is typed first (kforge_bot.optimize.trajectory_events) and `fold` dispatches on its type."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import singledispatchmethod
from typing import Any

from kforge_bot.evaluate.wire.result import per_shape_of
from kforge_bot.evaluate.wire.shapes import ShapeSpeedup, regressions
from kforge_bot.optimize.roofline import roofline_position
from kforge_bot.optimize.trajectory_events import (Baseline, CandidateWritten, Ceilings, CompiledBaselines,
                                                   CountersCollected, End, Judged, LLMError, Malformed, ModelReply,
                                                   Recommendations, Session, Start, Stop, Tunables, Workload, parse)
from kforge_bot.text import one_line


@dataclass
class IterationRecord:
    """One iteration: a candidate and its evaluation, or a reply that could not be used."""

    iteration: int
    verdict: str = "pending"  # an EvalResult verdict, "malformed", or "pending" (no result yet)
    reason: str = ""
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    accepted: bool = False
    file: str | None = None  # candidate source, relative to the report directory
    sha256: str | None = None
    change: str = ""  # what the step changed ("TILE_N 1->4"), when the proposer can say
    assignment: dict[str, int] | None = None  # tuner only
    result: dict[str, Any] | None = None
    eval_s: float = 0.0  # time inside evaluate()
    llm_s: float = 0.0  # time waiting for the generator's reply (the analyst runs after the step)
    iteration_s: float = 0.0  # the whole step, wall clock
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duplicate_of: int | None = None
    round: int | None = None  # --parallel: the round this candidate was proposed in (several per round)
    model: str | None = None  # the model asked for this candidate, when several take turns
    parent: int | None = None  # the iteration whose source the proposal started from (0: the kernel as written)
    loop_s: float | None = None  # the loop's own time for this candidate, measured directly (parallel rounds)
    cached: bool = False  # the result came from the result cache, not a new evaluation

    @property
    def completed(self) -> bool:
        return self.verdict != "pending"

    @property
    def per_shape(self) -> list[ShapeSpeedup]:
        """Each shape set's speedup and verdict (evaluate.wire.shapes); the headline `speedup` is their geometric
        mean."""
        return per_shape_of(self.result) if self.result else []

    @property
    def overhead_s(self) -> float:
        """The loop's own time in this step: everything but evaluating and waiting for the model. In a parallel
        round the candidates overlap, so the loop measures its own share per candidate directly."""
        if self.loop_s is not None:
            return self.loop_s
        return max(0.0, self.iteration_s - self.eval_s - self.llm_s)

    def summary(self) -> str:
        """One line for prompts and reports: what was tried and how it went."""
        what = self.change or "candidate"
        if self.verdict == "pass" and self.speedup is not None:
            tail = f"correct, {self.speedup:.3f}x" + (" (accepted)" if self.accepted else " (not better)")
        else:
            tail = f"{self.verdict}: {one_line(self.reason, 160)}" if self.reason else self.verdict
        return f"iteration {self.iteration}: {what}: {tail}"


@dataclass
class RunRecord:
    """The state of a run, folded from its events (see the module docstring)."""

    start: dict[str, Any] = field(default_factory=dict)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    baseline: dict[str, Any] | None = None  # the A/A evaluation result of the kernel as written
    baseline_eval_s: float = 0.0
    workload: dict[str, Any] | None = None
    ceilings: dict[str, Any] | None = None
    ceilings_note: str = ""  # where the ceilings come from, or why there are none
    compiled_baselines: dict[str, dict[str, Any]] | None = None  # kind -> CompiledBaseline.to_dict() (policy baseline)
    tunables: list[str] = field(default_factory=list)
    counters: dict[int, dict[str, Any]] = field(default_factory=dict)  # ncu's digest per profiled iteration
    counters_note: str = ""  # why no counters were collected, when none could be
    iterations: dict[int, IterationRecord] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)  # generator feedback since the last accepted step
    recommendations: list[str] = field(default_factory=list)  # the analyst's latest advice
    recommendation_log: list[dict[str, Any]] = field(default_factory=list)
    analysed_for: int | None = None  # iteration whose profile the latest advice read (0: the baseline)
    best: IterationRecord | None = None
    since_progress: int = 0  # completed iterations since the last accepted one
    usage: dict[str, Any] = field(default_factory=dict)  # the LLM client's running totals
    models: list[str] = field(default_factory=list)  # models that answered, in order of first reply
    llm_errors: list[dict[str, Any]] = field(default_factory=list)
    stops: list[dict[str, Any]] = field(default_factory=list)
    ends: list[dict[str, Any]] = field(default_factory=list)
    _first_time: dict[int, float] = field(default_factory=dict)
    _last_time: dict[int, float] = field(default_factory=dict)

    # -- folding --------------------------------------------------------------------------------

    def apply(self, entry: dict[str, Any]) -> None:
        """Fold one trajectory line (kforge_bot.optimize.trajectory_events types it)."""
        session = int(entry.get("session", 1))
        t = float(entry.get("time", 0.0))
        self._first_time.setdefault(session, t)
        self._last_time[session] = t
        event = parse(entry)
        if event is not None:
            self.fold(event)

    @singledispatchmethod
    def fold(self, event: object) -> None:
        """Fold one typed event into the state (one handler per type)."""

    @fold.register
    def _start(self, e: Start) -> None:
        self.start = e.entry

    @fold.register
    def _session(self, e: Session) -> None:
        self.sessions.append(e.entry)

    @fold.register
    def _baseline(self, e: Baseline) -> None:
        self.baseline, self.baseline_eval_s = e.result, e.eval_s

    @fold.register
    def _workload(self, e: Workload) -> None:
        self.workload = e.fields

    @fold.register
    def _compiled_baselines(self, e: CompiledBaselines) -> None:
        self.compiled_baselines = e.baselines

    @fold.register
    def _ceilings(self, e: Ceilings) -> None:
        self.ceilings, self.ceilings_note = e.ceilings, e.note

    @fold.register
    def _counters(self, e: CountersCollected) -> None:
        if e.iteration is None:  # the run cannot collect any: said once
            self.counters_note = e.reason
        else:
            self.counters[e.iteration] = e.fields

    @fold.register
    def _tunables(self, e: Tunables) -> None:
        self.tunables = e.tunables

    def _iteration(self, n: int) -> IterationRecord:
        return self.iterations.setdefault(n, IterationRecord(iteration=n))

    @fold.register
    def _reply(self, e: ModelReply) -> None:
        if e.usage:
            self.usage = dict(e.usage)
        if e.model and e.model not in self.models:
            self.models.append(e.model)
        if e.iteration > 0:
            it = self._iteration(e.iteration)
            it.prompt_tokens += e.prompt_tokens
            it.completion_tokens += e.completion_tokens
            if e.agent == "generator":  # the analyst runs after the step's clock stops
                it.llm_s += e.llm_s

    @fold.register
    def _candidate(self, e: CandidateWritten) -> None:
        it = self._iteration(e.iteration)
        it.file, it.sha256 = e.file, e.sha256
        it.change = e.change or it.change
        it.assignment, it.round, it.model, it.parent = e.assignment, e.round, e.model, e.parent

    @fold.register
    def _malformed(self, e: Malformed) -> None:
        if e.agent != "generator" or e.iteration <= 0:
            return  # an analyst reply that could not be used keeps the old advice; no iteration is spent
        it = self._iteration(e.iteration)
        it.verdict, it.reason, it.iteration_s = "malformed", e.feedback, e.iteration_s
        if e.history_entry:
            self.history.append(e.history_entry)
        self.since_progress += 1

    @fold.register
    def _result(self, e: Judged) -> None:
        it = self._iteration(e.iteration)
        result = it.result = e.result
        it.verdict = str(result.get("verdict", "unknown"))
        it.reason = str(result.get("reason", ""))
        it.speedup = result.get("speedup")
        ci = result.get("speedup_ci")
        it.speedup_ci = (float(ci[0]), float(ci[1])) if ci else None
        it.accepted, it.eval_s, it.iteration_s = e.accepted, e.eval_s, e.iteration_s
        it.duplicate_of, it.loop_s = e.duplicate_of, e.loop_s
        it.cached = bool(result.get("cached"))
        if e.round is not None:
            it.round = e.round
        if it.accepted:
            self.best = it
            self.history = []  # earlier failures were attempts on an older best
            self.since_progress = 0
        else:
            if e.history_entry:
                self.history.append(e.history_entry)
            self.since_progress += 1

    @fold.register
    def _recommendations(self, e: Recommendations) -> None:
        self.recommendations = e.items
        self.analysed_for = e.for_iteration
        self.recommendation_log.append({"for_iteration": self.analysed_for, "items": self.recommendations})

    @fold.register
    def _llm_error(self, e: LLMError) -> None:
        self.llm_errors.append(e.entry)

    @fold.register
    def _stop(self, e: Stop) -> None:
        self.stops.append(e.entry)

    @fold.register
    def _end(self, e: End) -> None:
        self.ends.append(e.entry)

    # -- questions ------------------------------------------------------------------------------

    @property
    def completed(self) -> list[IterationRecord]:
        return [self.iterations[n] for n in sorted(self.iterations) if self.iterations[n].completed]

    @property
    def iterations_used(self) -> int:
        return len(self.completed)

    @property
    def next_iteration(self) -> int:
        pending = self.pending
        if pending is not None:
            return pending.iteration
        return max((it.iteration for it in self.completed), default=0) + 1

    @property
    def fresh_iteration(self) -> int:
        """The number of the next candidate: the first after every judged or written one (a round writes several
        before judging them). An iteration that holds only a reply (a run stopped between the model's answer and
        its candidate) is asked again under its own number, its tokens kept with it."""
        return max((n for n, it in self.iterations.items() if it.completed or it.file), default=0) + 1

    @property
    def pendings(self) -> list[IterationRecord]:
        """Every candidate written but never evaluated, in order (a parallel round stopped half way)."""
        return sorted((it for it in self.iterations.values() if not it.completed and it.file),
                      key=lambda it: it.iteration)

    @property
    def rounds(self) -> int:
        """Parallel rounds started so far."""
        return max((it.round or 0 for it in self.iterations.values()), default=0)

    def beam(self, width: int) -> list[IterationRecord]:
        """The best `width` correct candidates by speedup (the best first): the parents of the next round."""
        correct = [it for it in self.completed if it.verdict == "pass" and it.speedup is not None
                   and it.duplicate_of is None and it.file and not regressions(it.per_shape)]
        correct.sort(key=lambda it: (-(it.speedup or 0.0), it.iteration))
        return correct[:max(0, width)]

    @property
    def pending(self) -> IterationRecord | None:
        """A candidate written but never evaluated (the run stopped in between): evaluate it on resume."""
        waiting = self.pendings
        return waiting[-1] if waiting else None

    @property
    def wall_s(self) -> float:
        """Wall time over every session, from each one's first event to its last."""
        return sum(self._last_time[s] - self._first_time[s] for s in self._first_time)

    @property
    def stop(self) -> dict[str, Any] | None:
        return self.stops[-1] if self.stops else None

    def tuner_results(self) -> list[tuple[dict[str, int], float | None]]:
        """(assignment, score) of every evaluated tuner candidate, in order: what the search replays."""
        out = []
        for it in self.completed:
            if it.assignment is not None and it.result is not None:
                out.append((dict(it.assignment), tuner_score(it.result)))
        return out

    def tried(self, limit: int = 12) -> list[str]:
        return [it.summary() for it in self.completed[-limit:]]

    def result_for(self, iteration: int) -> dict[str, Any] | None:
        if iteration == 0:
            return self.baseline
        it = self.iterations.get(iteration)
        return it.result if it else None

    # -- roofline --------------------------------------------------------------------------------

    def position(self, which: str = "best") -> dict[str, Any] | None:
        """Where the kernel as written ("baseline") or the best candidate ("best") sits on the roofline; None
        when the time or the bytes are unknown. Without ceilings the achieved figures are still given.

        Once there is a best, both sides come from its evaluation, where they were timed interleaved: figures
        from two separate evaluations would mix in whatever else the machine was doing at each time."""
        if which == "baseline":
            return roofline_position(self.paired_result(), "baseline", self.workload, self.ceilings)
        if self.best is None:
            return None
        return roofline_position(self.best.result, "candidate", self.workload, self.ceilings)

    def paired_result(self) -> dict[str, Any] | None:
        """The evaluation that measured the kernel as written next to the best (or next to itself)."""
        return self.best.result if self.best is not None and self.best.result else self.baseline

    def times_ms(self) -> tuple[float | None, float | None]:
        """(kernel as written, best) median milliseconds per call summed over the shape sets, from one
        interleaved measurement (the best's), else the first evaluation's time of the kernel as written."""
        paired = self.paired_result() or {}
        before = (paired.get("baseline") or {}).get("median_ms")
        after = (paired.get("candidate") or {}).get("median_ms") if self.best is not None else None
        return before, after


def tuner_score(result: dict[str, Any]) -> float | None:
    """The tuner's score of an evaluated candidate: its speedup when correct, else None (a failure). A candidate
    with a shape set's regression is a failure too: it can never be accepted, so the search must not climb from it."""
    if result.get("verdict") == "pass" and result.get("speedup") is not None and not regressions(per_shape_of(result)):
        return float(result["speedup"])
    return None

