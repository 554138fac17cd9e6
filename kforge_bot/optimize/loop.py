"""The optimization loop: propose candidates, evaluate them, keep the best, feed back, repeat.

The loop talks to two passive partners (kforge_bot.optimize.protocols): a `Proposer` (the built-in tuner, or the
KForge generator and analyst) and an `Evaluator`. Every step is a round: up to `parallel` candidates proposed
(one per slot), each evaluated as soon as it is written (kforge_bot.optimize.candidates), judged in order, then
observed together by the proposer. A sequential step is a round of one, on the same path, and records no round
number. A proposer call answers its events as data and the loop writes them: it is the trajectory's only writer.

A candidate is accepted only when it is correct and faster than the kernel as written with confidence, and better
than the current best by `min_gain` (kforge_bot.optimize.acceptance).

Control flow uses the loop-control exceptions of `kforge_bot.errors` (as in mini-swe-agent): a `NonTerminating`
signal (a malformed reply) costs its iteration and the run goes on; a `Terminating` one (budget spent, endpoint
gone, no progress, near the roofline, search exhausted) ends the run and the best candidate so far stands. Before
each round `stop_signal` (kforge_bot.optimize.stops), a pure function of the record, says whether the run goes on;
the loop alone checks the budgets, the token budget included. Everything the loop knows is in its trajectory
(kforge_bot.optimize.trajectory), written as it happens, so a stopped run resumes where it was without spending
an iteration twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict

from kforge_bot.config.policy import Budgets
from kforge_bot.errors import NonTerminating, Terminating
from kforge_bot.evaluate.baselines import requested_compiled
from kforge_bot.optimize import candidates
from kforge_bot.optimize.candidates import Candidate
from kforge_bot.optimize.counters import Counters
from kforge_bot.optimize.profiling import profile
from kforge_bot.optimize.protocols import Evaluator, Exchange, Interrupted, Proposal, Proposer, RunView
from kforge_bot.optimize.record import RunRecord
from kforge_bot.optimize.roofline import WorkloadModel
from kforge_bot.optimize.starting_point import measure_starting_point
from kforge_bot.optimize.stops import StopRules, expected_step_s, stop_signal, tokens_spent
from kforge_bot.optimize.trajectory import Trajectory
from kforge_bot.kernelspec import KernelSpec


class Loop:
    """One session of the loop over a run's trajectory: `run` until a stop (kforge_bot.optimize.run opens it)."""

    def __init__(self, spec: KernelSpec, target: str, proposer: Proposer, trajectory: Trajectory,
                 evaluator: Evaluator, *, budgets: Budgets, rules: StopRules,
                 workload_model: WorkloadModel | None = None, clock: Callable[[], float] = time.monotonic,
                 parallel: int = 1, beam: int = 1, counters: Counters | None = None,
                 baselines: tuple[str, ...] = ("eager",)) -> None:
        self.spec, self.target = spec, target
        self.proposer, self.evaluator, self.trajectory = proposer, evaluator, trajectory
        self.budgets, self.rules, self.clock = budgets, rules, clock
        self.compiled = requested_compiled(baselines)  # compiled baselines the policy asks for (evaluate.baselines)
        self.counters = counters  # hardware counters of the kernel as written and each accepted candidate
        self.workload_model = workload_model
        self.parallel = max(1, parallel)  # candidates proposed per round and evaluated at once
        self.beam = max(1, beam)  # correct candidates carried forward as the next round's parents
        self.hardware_text = f"Device kind: {target}"
        self._round_walls: list[float] = []
        self._prior_wall = 0.0  # wall time of earlier sessions
        self._session_start = 0.0
        self._done_before = 0  # iterations completed in earlier sessions

    @property
    def record(self) -> RunRecord:
        return self.trajectory.record

    def view(self, iteration: int = 0, slot: int = 0, taken: tuple[dict[str, int], ...] = ()) -> RunView:
        """What the proposer may read of the run, now (and which candidate it is asked for)."""
        return RunView(record=self.record, hardware_text=self.hardware_text, parallel=self.parallel, beam=self.beam,
                       baseline_source=self.spec.baseline.source, read_source=self.trajectory.read_source,
                       iteration=iteration, slot=slot, taken=taken)

    def best_source(self) -> str:
        return self.view().best_source()

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> tuple[str, str]:
        """Run until a Terminating signal; returns (stop kind, stop reason). KforgeError propagates."""
        self._prior_wall, self._session_start = self.record.wall_s, self.clock()
        self._done_before = self.record.iterations_used
        self.trajectory.append("session", resumed=self.trajectory.session > 1,
                               budgets=self.budgets.limits(), rules=asdict(self.rules))
        try:
            self._ask(self.proposer.prepare())
            self.hardware_text = measure_starting_point(
                self.spec, self.target, self.trajectory, self.evaluator, compiled=self.compiled,
                counters=self.counters, workload_model=self.workload_model)
            self._ask(self.proposer.observe(self.view(), ()))
            while True:  # one round per turn; a sequential step is a round of one
                self._check_stop()
                started = self.clock()
                batch, stop = self._open_round()
                self._judge_round(batch, stop, started)
        except Terminating as exc:
            kind, reason = type(exc).__name__, str(exc)
        except KeyboardInterrupt as exc:
            if isinstance(exc, Interrupted):
                self._write(exc.exchange)  # what the interrupted call had reported: its prompt, at least
            self.trajectory.append("stop", kind="Interrupted", reason="interrupted; continue with --resume",
                                   iteration=self.record.iterations_used)
            raise
        self.trajectory.append("stop", kind=kind, reason=reason, iteration=self.record.iterations_used)
        return kind, reason

    def elapsed_s(self) -> float:
        return self._prior_wall + (self.clock() - self._session_start)

    def _write(self, exchange: Exchange) -> None:
        """Write what a proposer call reports, at the moments it happened."""
        for event in exchange.events:
            self.trajectory.append(event.kind, at=event.at, **event.fields)

    def _ask(self, exchange: Exchange) -> Proposal | None:
        """Write what a proposer call reports; then raise the signal that ended the call, if one did, else answer
        its proposal."""
        self._write(exchange)
        if exchange.signal is not None:
            raise exchange.signal
        return exchange.proposal

    def _check_stop(self) -> None:
        """Raise what `stop_signal` says ends the run before the next round."""
        step_s = expected_step_s(self.record, self.parallel, self._round_walls, self.evaluator.slots)
        stop = stop_signal(self.record, self.budgets, self.rules, elapsed_s=self.elapsed_s(), step_s=step_s,
                           parallel=self.parallel, session_iterations=self.record.iterations_used - self._done_before)
        if stop is not None:
            raise stop

    # -- a round: a sequential step is a round of one ---------------------------------------------

    def _open_round(self) -> tuple[list[Candidate], Terminating | None]:
        """The round's candidates, each evaluated as soon as it is written (in the background where the evaluator
        can, so evaluation overlaps the next proposal): up to `parallel` new ones, or, after a stop, the stopped
        round's (written, never judged) and nothing new. With them, the signal that ended the run while some were
        already launched (they are judged first)."""
        record, batch = self.record, []
        pendings = record.pendings
        numbered = self.parallel > 1 or len(pendings) > 1  # a round of one records no round, as before rounds
        if pendings:
            round_no = (max((it.round or 0) for it in pendings) or record.rounds + 1) if numbered else None
            for it in pendings:
                self._launch(candidates.pending(self.trajectory, it, self.clock(), round_no), batch)
            return batch, None
        round_no = record.rounds + 1 if numbered else None
        taken: list[dict[str, int]] = []
        for slot in range(min(self.parallel, self.budgets.iterations - record.iterations_used)):
            try:
                candidate = self._propose(slot, tuple(taken), round_no)
            except NonTerminating:
                continue  # a reply with no usable kernel, recorded: its iteration is spent
            except Terminating as exc:
                if not batch:
                    raise
                return batch, exc  # judge what this round already launched, then stop
            if candidate is None:
                break  # nothing distinct left for this round
            if candidate.proposal.assignment:
                taken.append(dict(candidate.proposal.assignment))
            self._launch(candidate, batch)
        return batch, None

    def _propose(self, slot: int, taken: tuple[dict[str, int], ...], round_no: int | None) -> Candidate | None:
        """Ask for candidate `slot` and write it; None: nothing distinct left. NonTerminating: the reply was
        unusable (recorded as malformed); Terminating: the run ends (a spent token budget asks nothing more)."""
        iteration, started = self.record.fresh_iteration, self.clock()
        llm_before = self._llm_seconds(iteration)
        if slot and (spent := tokens_spent(self.record, self.budgets)) is not None:
            raise spent
        try:
            proposal = self._ask(self.proposer.propose(self.view(iteration=iteration, slot=slot, taken=taken)))
        except NonTerminating as exc:
            candidates.record_malformed(self.trajectory, exc, iteration, self.clock() - started, round_no)
            raise
        if proposal is None:
            return None
        candidate = candidates.written(self.trajectory, self.spec, iteration, proposal, started, round_no)
        candidate.llm_s = self._llm_seconds(iteration) - llm_before
        return candidate

    def _launch(self, candidate: Candidate, batch: list[Candidate]) -> None:
        candidates.start_evaluation(candidate, batch, self.trajectory, self.spec, self.evaluator)
        candidate.loop_s = max(0.0, self.clock() - candidate.started - candidate.llm_s)

    def _judge_round(self, batch: list[Candidate], stop: Terminating | None, started: float) -> None:
        """Judge the round in order (wait for each result, accept or not, record it), profile the best when the
        round brought a new one (every evaluation has returned, so the profiler runs beside no timed run), let the
        proposer observe the round, then raise `stop` if the run ended during it."""
        judged = []
        for candidate in batch:
            measured = candidate.measured()  # waiting on the evaluator is not the loop's time
            judged.append(candidates.record_result(self.trajectory, self.spec, candidate, measured,
                                                   self.rules.min_gain, clock=self.clock, judging_since=self.clock()))
        best = self.record.best
        if best is not None and any(it.iteration == best.iteration for it in judged):
            profile(self.counters, self.trajectory, best.iteration, self.spec.candidate_from_source(self.best_source()))
        if judged:  # a malformed reply is no candidate: nothing to observe
            # Observing may ask the model again (the analyst): not once the token budget is spent.
            stop = stop or tokens_spent(self.record, self.budgets)
            if stop is None:
                self._ask(self.proposer.observe(self.view(), judged))
        self._round_walls.append(self.clock() - started)
        if stop is not None:
            raise stop

    def _llm_seconds(self, iteration: int) -> float:
        it = self.record.iterations.get(iteration)
        return it.llm_s if it is not None else 0.0
