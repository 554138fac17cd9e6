"""The optimization loop: propose a candidate, evaluate it, keep the best, feed back, repeat.

Two proposers take turns at the same loop (kforge_bot.optimize.proposer says what the loop asks of them):
- `LLMProposer` (llm_proposer.py): the KForge generator writes or repairs the kernel from the current best, the
  failures since then (compile errors, crashes, correctness diffs) and the analyst's ranked advice; the
  analyst reads the profile of the kernel as written and of every accepted candidate.
- `TunerProposer` (tuner_proposer.py): with no model configured, the built-in tuner searches the kernel's own
  parameters (block sizes, warps, stages, threads, tiles), guided by the same profile digest.
A proposer reports what happened (its prompts, replies, advice) and the loop writes it: the loop is the
trajectory's only writer. Every step is a round: up to `parallel` candidates proposed (`propose_for`, one per
slot), evaluated, judged in order, then observed together (`observe_round`). A sequential step is a round of one,
on the same path, and records no round number.

A candidate is accepted only when `evaluate` says it is correct and faster than the kernel as written with
confidence (the whole speedup interval above 1), and better than the current best by `min_gain`.

Control flow uses the loop-control exceptions of `kforge_bot.errors` (as in mini-swe-agent): a
`NonTerminating` signal (a malformed reply) costs its iteration and the run goes on; a `Terminating` one
(budget spent, endpoint gone, no progress, near the roofline, search exhausted) ends the run and the best
candidate so far stands. Before each round `stop_signal` (kforge_bot.optimize.stops), a pure function of the
record, says whether the run goes on; the loop alone checks the budgets, the token budget included. Everything
the loop knows is in its trajectory (kforge_bot.optimize.trajectory), written as it happens, so a stopped run
resumes where it was without spending an iteration twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from kforge_bot.agents import generator
from kforge_bot.config.policy import Budgets
from kforge_bot.errors import KforgeError, MalformedReply, NonTerminating, Terminating
from kforge_bot.evaluate.baselines import CompiledBaseline, against_baselines, beats_every_baseline, requested_compiled
from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.optimize.counters import DETAILS_FILE, Counters, details_csv
from kforge_bot.optimize.digest import profile_digest
from kforge_bot.optimize.evaluator import Progress
from kforge_bot.optimize.hardware_context import hardware_context, hardware_text
from kforge_bot.optimize.proposer import Proposal, Proposer, RunView, Steps
from kforge_bot.optimize.record import IterationRecord, RunRecord
from kforge_bot.optimize.roofline import WorkloadModel, workload
from kforge_bot.optimize.stops import StopRules, stop_signal, tokens_spent
from kforge_bot.optimize.trajectory import Trajectory, sha256
from kforge_bot.spec import Implementation, KernelSpec
from kforge_bot.text import one_line

T = TypeVar("T")


@dataclass(eq=False)
class _Candidate:
    """One candidate of a round on its way from proposal to record."""

    iteration: int
    proposal: Proposal
    started: float  # the loop's clock when its step began
    round: int | None = None  # its parallel round; None: a round of one (a sequential step)
    llm_s: float = 0.0  # waiting for the model while it was proposed
    loop_s: float = 0.0  # the loop's own time for it before judging
    source_sha256: str | None = None
    duplicate_of: int | None = None  # an earlier iteration with the same source, whose result it takes
    twin: _Candidate | None = None  # the same source earlier in its round, still being evaluated
    future: Future[tuple[EvalResult, float]] | None = None
    done: tuple[EvalResult, float] | None = None

    def result(self) -> tuple[EvalResult, float]:
        """(result, seconds inside evaluate), waiting for the evaluation when it runs on a pool."""
        if self.done is None:
            assert self.future is not None
            self.done = self.future.result()
        return self.done


class Loop:
    """One session of the loop over a run's trajectory: `run` until a stop (kforge_bot.optimize.run opens it)."""

    def __init__(self, spec: KernelSpec, target: str, proposer: Proposer, trajectory: Trajectory,
                 evaluator: Callable[[Implementation], tuple[EvalResult, float]], *, budgets: Budgets,
                 rules: StopRules, workload_model: WorkloadModel | None = None,
                 progress: Progress | None = None, clock: Callable[[], float] = time.monotonic,
                 parallel: int = 1, beam: int = 1, counters: Counters | None = None,
                 baselines: tuple[str, ...] = ("eager",)) -> None:
        self.spec = spec
        self.baselines = requested_compiled(baselines)  # compiled baselines the policy asks for (evaluate.baselines)
        self.counters = counters  # hardware counters of the kernel as written and each accepted candidate
        self.target = target
        self.proposer = proposer
        self.trajectory = trajectory
        self.evaluator = evaluator
        self.budgets = budgets
        self.rules = rules
        self.workload_model = workload_model
        self.progress = progress
        self.clock = clock
        self.parallel = max(1, parallel)  # candidates proposed per round and evaluated at once
        self.beam = max(1, beam)  # correct candidates carried forward as the next round's parents
        self._round_walls: list[float] = []
        self.hardware_text = f"Device kind: {target}"
        self._prior_wall = 0.0
        self._session_start = 0.0
        self._done_before = 0  # iterations completed in earlier sessions

    @property
    def record(self) -> RunRecord:
        return self.trajectory.record

    # -- the proposer ---------------------------------------------------------------------------

    def view(self) -> RunView:
        """What the proposer may read of the run, now."""
        return RunView(record=self.record, hardware_text=self.hardware_text, parallel=self.parallel, beam=self.beam,
                       baseline_source=self.spec.baseline.source, read_source=self.trajectory.read_source)

    def best_source(self) -> str:
        return self.view().best_source()

    def _follow(self, steps: Steps[T]) -> T:
        """Follow one proposer call to its answer, writing each event it reports the moment it comes (the
        trajectory's only writer is the loop; kforge_bot.optimize.proposer says why a call is a generator)."""
        while True:
            try:
                event = next(steps)
            except StopIteration as done:
                return done.value
            self.trajectory.append(event.kind, **event.fields)

    def _profile_counters(self, iteration: int, implementation: Implementation) -> None:
        """Hardware counters (ncu, unitrace) for the kernel as written (0) or an accepted candidate: between
        evaluations, never beside a timed run. The report folder's ncu-details.csv then holds the baseline and the
        best."""
        counters, record = self.counters, self.record
        if counters is None or iteration in record.counters:
            return
        if counters.reason is not None:
            if not record.counters_note:
                self.trajectory.append("counters", iteration=None, available=False, reason=counters.reason)
            return
        got = counters.collect(iteration, implementation, profile_digest(record, iteration).get("time_ms"),
                               device_name=str((record.baseline or {}).get("device_name") or ""))
        self.trajectory.append("counters", iteration=iteration, **got)
        best = record.best
        (self.trajectory.root / DETAILS_FILE).write_text(details_csv(
            record.counters.get(0), record.counters.get(best.iteration) if best else None,
            f"iteration {best.iteration}" if best else "best"), encoding="utf-8")

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> tuple[str, str]:
        """Run until a Terminating signal; returns (stop kind, stop reason). KforgeError propagates."""
        self._prior_wall = self.record.wall_s
        self._session_start = self.clock()
        self._done_before = self.record.iterations_used
        self.trajectory.append("session", resumed=self.trajectory.session > 1,
                               budgets=self.budgets.limits(), rules=asdict(self.rules))
        try:
            self._follow(self.proposer.prepare())
            self._ensure_baseline()
            self._follow(self.proposer.start(self.view()))
            while True:  # one round per turn; a sequential step is a round of one
                self._check_stop()
                started = self.clock()
                batch, stop = self._open_round()
                self._judge_round(batch, stop, started)
        except Terminating as exc:
            kind, reason = type(exc).__name__, str(exc)
        except KeyboardInterrupt:
            self.trajectory.append("stop", kind="Interrupted", reason="interrupted; continue with --resume",
                                   iteration=self.record.iterations_used)
            raise
        self.trajectory.append("stop", kind=kind, reason=reason, iteration=self.record.iterations_used)
        return kind, reason

    def elapsed_s(self) -> float:
        return self._prior_wall + (self.clock() - self._session_start)

    def _check_stop(self) -> None:
        """Raise what `stop_signal` says ends the run before the next round."""
        stop = stop_signal(self.record, self.budgets, self.rules, elapsed_s=self.elapsed_s(),
                           step_s=self._expected_step_s(), parallel=self.parallel,
                           session_iterations=self.record.iterations_used - self._done_before)
        if stop is not None:
            raise stop

    def _expected_step_s(self) -> float:
        """What the next iteration will probably take: the mean of the steps so far, else the first evaluation's
        time minus the reference run it included (roughly half of it)."""
        if self.parallel > 1:
            if self._round_walls:
                return sum(self._round_walls) / len(self._round_walls)
            slots = getattr(getattr(self.evaluator, "pool", None), "size", 1) or 1
            return self.record.baseline_eval_s / 2 * -(-self.parallel // slots)
        steps = [it.iteration_s for it in self.record.completed if it.iteration_s > 0 and it.duplicate_of is None]
        if steps:
            return sum(steps) / len(steps)
        return self.record.baseline_eval_s / 2

    def _ensure_baseline(self) -> None:
        record = self.record
        if record.baseline is None:
            result, eval_s = self.evaluator(self.spec.baseline)
            self.trajectory.append("baseline", result=result.to_dict(), eval_s=round(eval_s, 3))
        baseline = self.record.baseline or {}
        # inconclusive: correct, its timing (against itself) disturbed: a correct starting point all the same.
        if baseline.get("verdict") in ("pass", "inconclusive"):
            self._profile_counters(0, self.spec.baseline)
        if baseline.get("verdict") not in ("pass", "inconclusive"):
            raise KforgeError(
                f"the kernel as written fails its own check ({baseline.get('verdict')}: "
                f"{one_line(str(baseline.get('reason', '')), 300)})", path=self.spec.kernel_path,
                hint="run `kforge-bot check` on it to see why; optimizing needs a correct starting point")
        if self.baselines and record.compiled_baselines is None:
            compiled = self.evaluator.compiled_baselines(self.baselines)
            self.trajectory.append("compiled_baselines", baselines={k: c.to_dict() for k, c in compiled.items()})
        if record.workload is None:
            self.trajectory.append("workload", **workload(self.spec.shape_sets, self.record.baseline,
                                                          self.workload_model))
        device = str(baseline.get("device_name") or "")
        facts, ceilings, origin_note = hardware_context(self.target, device)
        if record.ceilings is None and not any(e.get("event") == "ceilings" for e in self.trajectory.events):
            self.trajectory.append("ceilings", ceilings=ceilings, device_name=device, note=origin_note,
                                   runner=facts.name if facts else None)
        self.hardware_text = hardware_text(self.target, device, facts, self.record.ceilings)

    # -- from proposal to record: one path, a sequential step being a round of one ----------------

    def _open_round(self) -> tuple[list[_Candidate], Terminating | None]:
        """The round's candidates, each evaluated as soon as it is written (on the pool when there is one, so
        evaluation overlaps the next proposal): up to `parallel` new ones, or, after a stop, the stopped round's
        (written, never judged) and nothing new. With them, the signal that ended the run while some were already
        launched (they are judged first)."""
        record = self.record
        batch: list[_Candidate] = []
        pendings = record.pendings
        numbered = self.parallel > 1 or len(pendings) > 1  # a round of one records no round, as before rounds
        if pendings:
            round_no = (max((it.round or 0) for it in pendings) or record.rounds + 1) if numbered else None
            for it in pendings:
                self._enter(self._pending_candidate(it, self.clock(), round_no), batch)
            return batch, None
        round_no = record.rounds + 1 if numbered else None
        taken: list[dict[str, int]] = []
        for slot in range(min(self.parallel, self.budgets.iterations - record.iterations_used)):
            iteration = record.fresh_iteration
            started = self.clock()
            llm_before = self._llm_seconds(iteration)
            try:
                if slot and (spent := tokens_spent(record, self.budgets)) is not None:
                    raise spent  # an earlier sample spent the token budget: ask the model nothing more
                proposal = self._follow(self.proposer.propose_for(iteration, slot, taken, self.view()))
            except NonTerminating as exc:
                self._record_malformed(exc, iteration, started, **({} if round_no is None else {"round": round_no}))
                continue
            except Terminating as exc:
                if not batch:
                    raise
                return batch, exc  # judge what this round already launched, then stop
            if proposal is None:
                break
            if proposal.assignment:
                taken.append(dict(proposal.assignment))
            candidate = self._write_candidate(iteration, proposal, started, round_no)
            candidate.llm_s = self._llm_seconds(iteration) - llm_before
            self._enter(candidate, batch)
        return batch, None

    def _pending_candidate(self, it: IterationRecord, started: float, round_no: int | None = None) -> _Candidate:
        proposal = Proposal(self.trajectory.read_source(it.file or ""), it.change, it.assignment, it.parent, it.model)
        return _Candidate(it.iteration, proposal, started, round_no)

    def _write_candidate(self, iteration: int, proposal: Proposal, started: float,
                         round_no: int | None = None) -> _Candidate:
        """Save a new candidate's source and its candidate event (a round's also says its round, parent, model)."""
        suffix = Path(self.spec.kernel_file).suffix or ".py"
        rel = self.trajectory.write_source(f"{iteration:04d}{suffix}", proposal.source)
        in_round = {} if round_no is None else {"round": round_no, "parent": proposal.parent, "model": proposal.model}
        self.trajectory.append("candidate", iteration=iteration, file=rel, sha256=sha256(proposal.source),
                               change=proposal.change, assignment=proposal.assignment, **in_round)
        return _Candidate(iteration, proposal, started, round_no)

    def _enter(self, candidate: _Candidate, batch: list[_Candidate]) -> None:
        """Add a candidate to its batch and start its evaluation: none for a source measured before (its
        result is reused) or already in the batch (its twin's is); else on the pool when there is one."""
        batch.append(candidate)
        digest = candidate.source_sha256 = sha256(candidate.proposal.source)
        earlier = next((it for it in self.record.completed if it.sha256 == digest and it.result is not None), None)
        twin = next((c for c in batch if c is not candidate and c.source_sha256 == digest), None)
        if earlier is not None:
            candidate.duplicate_of = earlier.iteration
            candidate.done = (EvalResult.from_dict(earlier.result or {}), 0.0)
        elif twin is not None:
            candidate.duplicate_of, candidate.twin = twin.iteration, twin
        else:
            implementation = self.spec.candidate_from_source(candidate.proposal.source)
            submit = getattr(self.evaluator, "submit", None)  # a plain callable (tests) evaluates at once
            candidate.future = submit(implementation) if submit is not None else None
            if candidate.future is None:
                candidate.done = self.evaluator(implementation)
        candidate.loop_s = max(0.0, self.clock() - candidate.started - candidate.llm_s)

    def _judge_round(self, batch: list[_Candidate], stop: Terminating | None, started: float) -> None:
        """Judge the round in order (wait for each result, accept or not, record it), profile the best when the
        round brought a new one (every evaluation has returned, so the profiler runs beside no timed run), let the
        proposer observe the round, then raise `stop` if the run ended during it."""
        judged = []
        for candidate in batch:
            if candidate.twin is not None:  # the same source twice in one round: evaluated once, free for the twin
                candidate.done = (candidate.twin.result()[0], 0.0)
            result, eval_s = candidate.result()  # waiting on the pool is not the loop's time
            judged.append(self._record_result(candidate, result, eval_s, judging_since=self.clock()))
        best = self.record.best
        if best is not None and any(it.iteration == best.iteration for it in judged):
            self._profile_counters(best.iteration, self.spec.candidate_from_source(self.best_source()))
        if judged:  # a malformed reply is no candidate: nothing to observe
            # Observing may ask the model again (the analyst): not once the token budget is spent.
            stop = stop or tokens_spent(self.record, self.budgets)
            if stop is None:
                self._follow(self.proposer.observe_round(judged, self.view()))
        self._round_walls.append(self.clock() - started)
        if stop is not None:
            raise stop

    def _record_result(self, candidate: _Candidate, result: EvalResult, eval_s: float,
                       judging_since: float) -> IterationRecord:
        """Append a candidate's result (with the generator's feedback when it is not accepted) and keep an
        accepted source as best<suffix>. A numbered round's result also says its round and the loop's own time
        for the candidate (everything but waiting for the model and for evaluations): its time before judging
        plus the judging up to this append."""
        if self.record.compiled_baselines and result.correct and result.details.get("timing"):
            compiled = {k: CompiledBaseline.from_dict(v) for k, v in self.record.compiled_baselines.items()}
            result.details["baselines"] = against_baselines(result, compiled)
        accepted = candidate.duplicate_of is None and self._accepts(result)  # a repeat is never better than itself
        result_dict = result.to_dict()
        history = None if accepted else generator.failure_from_result(result_dict, iteration=candidate.iteration,
                                                                       source=candidate.proposal.source)
        extra: dict[str, Any] = {"duplicate_of": candidate.duplicate_of}
        if candidate.round is not None:
            extra["round"] = candidate.round
            extra["loop_s"] = round(candidate.loop_s + (self.clock() - judging_since), 4)
        self.trajectory.append("result", iteration=candidate.iteration, result=result_dict, accepted=accepted,
                               eval_s=round(eval_s, 3), iteration_s=round(self.clock() - candidate.started, 3),
                               history_entry=history, **extra)
        if accepted:
            suffix = Path(self.spec.kernel_file).suffix or ".py"
            (self.trajectory.root / f"best{suffix}").write_text(candidate.proposal.source, encoding="utf-8")
        return self.record.iterations[candidate.iteration]

    def _record_malformed(self, exc: NonTerminating, iteration: int, started: float, **extra: Any) -> None:
        """A generator reply with no usable kernel: the iteration is spent, its feedback goes to the history."""
        feedback = getattr(exc, "feedback", str(exc))
        malformed = generator.failure_from_malformed(
            exc if isinstance(exc, MalformedReply) else MalformedReply(feedback), iteration=iteration,
            reply=getattr(exc, "reply", None))
        self.trajectory.append("malformed", iteration=iteration, agent="generator", feedback=feedback,
                               history_entry=malformed, iteration_s=round(self.clock() - started, 3), **extra)

    def _llm_seconds(self, iteration: int) -> float:
        it = self.record.iterations.get(iteration)
        return it.llm_s if it is not None else 0.0

    def _accepts(self, result: EvalResult) -> bool:
        """Correct and faster than the kernel as written with confidence (and, where the policy asks for compiled
        baselines, than the faster of it and them: details.baselines), and better than the best so far."""
        faster, against = beats_every_baseline(result)
        result.details["accepted_against"] = against
        if not faster or result.speedup is None:
            return False
        best = self.record.best
        return best is None or best.speedup is None or result.speedup > best.speedup * (1.0 + self.rules.min_gain)

