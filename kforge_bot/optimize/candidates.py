"""A candidate on its way from proposal to record: its source and candidate event written, its evaluation started
(none for a source measured before, or twice in one round), its result judged and recorded. The loop
(kforge_bot.optimize.loop) moves each candidate of a round through these steps; a sequential step is a round of
one, on the same path, and records no round number."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_bot.agents import generator
from kforge_bot.errors import MalformedReply, NonTerminating
from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.optimize.acceptance import accepts, with_baselines
from kforge_bot.optimize.protocols import Evaluator, Measured, Proposal
from kforge_bot.optimize.record import IterationRecord
from kforge_bot.optimize.trajectory import Trajectory, sha256
from kforge_bot.kernelspec import KernelSpec


@dataclass(eq=False)
class Candidate:
    """One candidate of a round on its way from proposal to record."""

    iteration: int
    proposal: Proposal
    started: float  # the loop's clock when its step began
    round: int | None = None  # its parallel round; None: a round of one (a sequential step)
    llm_s: float = 0.0  # waiting for the model while it was proposed
    loop_s: float = 0.0  # the loop's own time for it before judging
    source_sha256: str | None = None
    duplicate_of: int | None = None  # an earlier iteration with the same source, whose result it takes
    twin: Candidate | None = None  # the same source earlier in its round, still being evaluated
    future: Future[Measured] | None = None
    done: Measured | None = None

    def measured(self) -> Measured:
        """Its evaluation, waiting for it when it runs in the background; a twin's, free."""
        if self.done is None and self.twin is not None:
            self.done = Measured(self.twin.measured().result, 0.0)
        if self.done is None:
            assert self.future is not None
            self.done = self.future.result()
        return self.done


def suffix_of(spec: KernelSpec) -> str:
    return Path(spec.kernel_file).suffix or ".py"


def written(trajectory: Trajectory, spec: KernelSpec, iteration: int, proposal: Proposal, started: float,
            round_no: int | None = None) -> Candidate:
    """Save a new candidate's source and its candidate event (a round's also says its round, parent, model)."""
    rel = trajectory.write_source(f"{iteration:04d}{suffix_of(spec)}", proposal.source)
    in_round = {} if round_no is None else {"round": round_no, "parent": proposal.parent, "model": proposal.model}
    trajectory.append("candidate", iteration=iteration, file=rel, sha256=sha256(proposal.source),
                      change=proposal.change, assignment=proposal.assignment, **in_round)
    return Candidate(iteration, proposal, started, round_no)


def pending(trajectory: Trajectory, it: IterationRecord, started: float, round_no: int | None = None) -> Candidate:
    """A candidate written but never judged (the run stopped in between), as its record says."""
    proposal = Proposal(trajectory.read_source(it.file or ""), it.change, it.assignment, it.parent, it.model)
    return Candidate(it.iteration, proposal, started, round_no)


def start_evaluation(candidate: Candidate, batch: list[Candidate], trajectory: Trajectory, spec: KernelSpec,
                     evaluator: Evaluator) -> None:
    """Add a candidate to its batch and start its evaluation: none for a source measured before (its result is
    reused) or already in the batch (its twin's is)."""
    batch.append(candidate)
    digest = candidate.source_sha256 = sha256(candidate.proposal.source)
    earlier = next((it for it in trajectory.record.completed if it.sha256 == digest and it.result is not None), None)
    twin = next((c for c in batch if c is not candidate and c.source_sha256 == digest), None)
    if earlier is not None:
        candidate.duplicate_of = earlier.iteration
        candidate.done = Measured(EvalResult.from_dict(earlier.result or {}), 0.0)
    elif twin is not None:
        candidate.duplicate_of, candidate.twin = twin.iteration, twin
    else:
        candidate.future = evaluator.submit(spec.candidate_from_source(candidate.proposal.source))


def record_result(trajectory: Trajectory, spec: KernelSpec, candidate: Candidate, measured: Measured,
                  min_gain: float, *, clock: Callable[[], float], judging_since: float) -> IterationRecord:
    """Append a candidate's result (with the generator's feedback when it is not accepted) and keep an accepted
    source as best<suffix>. A numbered round's result also says its round and the loop's own time for the
    candidate (everything but waiting for the model and for evaluations): its time before judging plus the
    judging up to this append."""
    result = with_baselines(trajectory.record, measured.result)
    # a repeat is never better than itself
    accepted = candidate.duplicate_of is None and accepts(trajectory.record, result, min_gain)
    result_dict = result.to_dict()
    history = None if accepted else generator.failure_from_result(result_dict, iteration=candidate.iteration,
                                                                   source=candidate.proposal.source)
    extra: dict[str, Any] = {"duplicate_of": candidate.duplicate_of}
    now = clock()
    if candidate.round is not None:
        extra["round"] = candidate.round
        extra["loop_s"] = round(candidate.loop_s + (now - judging_since), 4)
    trajectory.append("result", iteration=candidate.iteration, result=result_dict, accepted=accepted,
                      eval_s=round(measured.eval_s, 3), iteration_s=round(now - candidate.started, 3),
                      history_entry=history, **extra)
    if accepted:
        (trajectory.root / f"best{suffix_of(spec)}").write_text(candidate.proposal.source, encoding="utf-8")
    return trajectory.record.iterations[candidate.iteration]


def record_malformed(trajectory: Trajectory, exc: NonTerminating, iteration: int, iteration_s: float,
                     round_no: int | None) -> None:
    """A generator reply with no usable kernel: the iteration is spent, its feedback goes to the history."""
    feedback = getattr(exc, "feedback", str(exc))
    malformed = generator.failure_from_malformed(
        exc if isinstance(exc, MalformedReply) else MalformedReply(feedback), iteration=iteration,
        reply=getattr(exc, "reply", None))
    trajectory.append("malformed", iteration=iteration, agent="generator", feedback=feedback,
                      history_entry=malformed, iteration_s=round(iteration_s, 3),
                      **({} if round_no is None else {"round": round_no}))
