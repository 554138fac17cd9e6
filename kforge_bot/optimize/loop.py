"""The optimization loop: propose a candidate, evaluate it, keep the best, feed back, repeat.

Two proposers take turns at the same loop:
- `LLMProposer`: the KForge generator writes or repairs the kernel from the current best, the failures
  since then (compile errors, crashes, correctness diffs) and the analyst's ranked advice; the analyst
  reads the profile of the kernel as written and of every accepted candidate.
- `TunerProposer`: with no model configured, the built-in tuner searches the kernel's own parameters
  (block sizes, warps, stages, threads, tiles), guided by the same profile digest.

A candidate is accepted only when `evaluate` says it is correct and faster than the kernel as written with
confidence (the whole speedup interval above 1), and better than the current best by `min_gain`.

Control flow uses the loop-control exceptions of `kforge_bot.agents.errors` (as in mini-swe-agent): a
`NonTerminating` signal (a malformed reply) costs its iteration and the run goes on; a `Terminating` one
(budget spent, endpoint gone, no progress, near the roofline, search exhausted) ends the run and the best
candidate so far stands. Everything the loop knows is in its trajectory (kforge_bot.optimize.trajectory), written
as it happens, so a stopped run resumes where it was without spending an iteration twice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from kforge_bot.agents import analyst, generator, tuner
from kforge_bot.agents.errors import (
    BudgetExhausted,
    MalformedReply,
    NonTerminating,
    Terminating,
)
from kforge_bot.optimize.counters import DETAILS_FILE, Counters, details_csv, tool_title
from kforge_bot.optimize.evaluator import Evaluator, Progress
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.result import EvalResult, EvalSettings
from kforge_bot.spec import Implementation, KernelSpec
from kforge_bot.text import one_line
from kforge_bot.optimize.trajectory import (
    SCHEMA,
    IterationRecord,
    RunRecord,
    Trajectory,
    roofline_position,
    sha256,
)

# A workload model: shape set -> (bytes moved, FLOPs or None). Benchmarks that know their kernels pass one;
# otherwise the compulsory traffic is counted from the baseline's evaluation (inputs read once, outputs written once).
WorkloadModel = Callable[[dict[str, Any]], "tuple[float, float | None]"]

TUNER = "tuner"
LLM = "llm"


# ------------------------------------------------------------------------------- loop-control signals


class NoProgress(Terminating):
    """K rounds in a row brought no better candidate."""


class NearRoofline(Terminating):
    """The kernel already sits within the set fraction of its roofline: little is left to gain."""


class SearchExhausted(Terminating):
    """The tuner has nothing left to try (or nothing to tune at all)."""


# ------------------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class Budgets:
    """What one run may spend, over all its sessions (a resumed run continues the same budgets)."""

    iterations: int = 10
    tokens: int | None = None
    time_limit_s: float | None = None


@dataclass(frozen=True)
class StopRules:
    patience: int = 4  # stop after this many iterations in a row without a new best
    roofline_fraction: float = 0.9  # stop once the best (or the baseline) reaches this fraction of its roofline
    speed_of_light: float = 0.9  # ... or, by ncu's counters, this fraction of its busiest unit's peak
    min_gain: float = 0.01  # a new best must beat the old one's speedup by this much (relative)


def quick_settings(allow_framework_fallback: bool = False) -> EvalSettings:
    """Evaluation when no policy is given: the quickstart's CPU example in a few minutes."""
    return EvalSettings(seeds=2, time_budget_s=2.0, timeout_s=300.0, allow_framework_fallback=allow_framework_fallback)


def quick_rules(mode: str) -> StopRules:
    """The tuner's coordinate descent expects misses (each direction of each parameter is one), so it gets
    more patience than a model, whose misses mean it is out of ideas."""
    return StopRules(patience=6 if mode == TUNER else 4)


@dataclass
class Proposal:
    source: str
    change: str = ""
    assignment: dict[str, int] | None = None
    parent: int | None = None  # the iteration it started from (0: the kernel as written)
    model: str | None = None


class Proposer(Protocol):
    mode: str

    def bind(self, loop: Loop) -> None: ...

    def prepare(self) -> None: ...

    def start(self) -> None: ...

    def propose(self, iteration: int) -> Proposal: ...

    def observe(self, it: IterationRecord) -> None: ...

    def describe(self) -> dict[str, Any]: ...


# ------------------------------------------------------------------------------------------ proposers


class TunerProposer:
    """The built-in tuner as a proposer: every candidate is the ORIGINAL source with new parameter values."""

    mode = TUNER

    def __init__(self, spec: KernelSpec, *, cpu_count: int | None = None, min_gain: float = 0.01) -> None:
        self.spec = spec
        self.original = spec.baseline.source
        self.tunables = tuner.find_tunables(self.original, spec.language, path=str(spec.kernel_path),
                                            cpu_count=cpu_count)
        self.current = tuner.current_assignment(self.tunables)
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
        hint = tuner.profile_hint(self.loop.digest(0))
        self.search = tuner.TunerSearch(self.tunables, hint=hint, min_gain=self.min_gain)
        for assignment, score in self.loop.record.tuner_results():  # resume: replay, propose nothing twice
            self.search.record(assignment, score)

    def propose(self, iteration: int) -> Proposal:
        assert self.search is not None
        assignment = self.search.propose()
        if assignment is None:
            raise SearchExhausted("the tuner tried every neighbouring value of every parameter without further gain")
        source = tuner.apply(self.original, assignment, self.spec.language)
        change = ", ".join(f"{k} {self.current[k]}->{v}" for k, v in assignment.items() if v != self.current[k])
        return Proposal(source=source, change=change or "as written", assignment=assignment)

    def observe(self, it: IterationRecord) -> None:
        if self.search is not None and it.assignment is not None and it.result is not None:
            from kforge_bot.optimize.trajectory import tuner_score

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
        source = tuner.apply(self.original, assignment, self.spec.language)
        change = ", ".join(f"{k} {self.current[k]}->{v}" for k, v in assignment.items() if v != self.current[k])
        return Proposal(source=source, change=change or "as written", assignment=assignment)

    def observe_round(self, its: list[IterationRecord]) -> None:
        for it in its:
            self.observe(it)


class LLMProposer:
    """The KForge generator and analyst, talking to an OpenAI-compatible endpoint."""

    mode = LLM

    def __init__(self, client: Any, spec: KernelSpec, target_kind: str, *,
                 references: Sequence[dict[str, Any]] = (), models: Sequence[str] = ()) -> None:
        self.client = client  # kforge_bot.agents.llm.LLMClient
        self.spec = spec
        self.target_kind = target_kind
        self.references = list(references)
        self.models = list(models)
        self.contract = generator.contract_from_spec(spec)
        generator.kernel_language(spec.language, target_kind)  # no prompt for this language: fail before spending
        self.loop: Loop | None = None

    def bind(self, loop: Loop) -> None:
        self.loop = loop

    def prepare(self) -> None:
        """Settle the model before minutes of evaluation: with no model named this asks the endpoint for its
        models (GET /models), so a wrong URL or key ends the run at once."""
        assert self.loop is not None
        try:
            self.client.resolve_model()
        except Terminating as exc:
            self.loop.trajectory.append("llm_error", iteration=0, agent="models", kind=type(exc).__name__,
                                        message=str(exc))
            raise

    def describe(self) -> dict[str, Any]:
        return {"generator": "LLM", "endpoint": self.client.endpoint.describe(), "model": self.client.endpoint.model,
                "references": [r.get("note") or r.get("file") or r.get("target") for r in self.references]}

    def start(self) -> None:
        assert self.loop is not None
        record = self.loop.record
        if record.usage:
            from kforge_bot.agents.llm import Usage

            self.client.usage = Usage.from_dict(record.usage)  # resume: the token budget counts what was spent
        subject = record.best.iteration if record.best else 0
        if record.analysed_for != subject:
            self.analyse(subject)

    def propose(self, iteration: int) -> Proposal:
        assert self.loop is not None
        record = self.loop.record
        best = record.best
        messages = generator.build_messages(
            language=self.spec.language, target_kind=self.target_kind, hardware=self.loop.hardware_text,
            contract=self.contract, current_source=self.loop.best_source(), history=record.history,
            recommendations=record.recommendations, references=self.references,
            best_speedup=best.speedup if best else None)
        reply = self._chat("generator", iteration, messages)
        try:
            source = generator.extract_source(reply.text, self.spec.language, self.spec.entry,
                                              filename=self.spec.kernel_file, truncated=reply.truncated)
        except MalformedReply as exc:
            exc.reply = reply.text  # type: ignore[attr-defined]  # for the history entry's excerpt
            raise
        return Proposal(source=source)

    def observe(self, it: IterationRecord) -> None:
        if it.accepted:
            self.analyse(it.iteration)

    # -- parallel rounds ------------------------------------------------------------------------

    def propose_for(self, iteration: int, slot: int, round_taken: list[Any]) -> Proposal | None:
        """One of the round's samples: the models take turns (by iteration), the parents are the beam's
        members in turn (the kernel as written while there is no correct candidate)."""
        assert self.loop is not None
        record = self.loop.record
        parents: list[IterationRecord | None] = list(record.beam(self.loop.beam)) or [None]
        parent = parents[slot % len(parents)]
        model = self.models[(iteration - 1) % len(self.models)] if self.models else None
        source_now = self.loop.trajectory.read_source(parent.file) if parent is not None and parent.file \
            else self.spec.baseline.source
        messages = generator.build_messages(
            language=self.spec.language, target_kind=self.target_kind, hardware=self.loop.hardware_text,
            contract=self.contract, current_source=source_now, history=record.history,
            recommendations=record.recommendations, references=self.references,
            best_speedup=parent.speedup if parent is not None else None)
        # The sample's model for this request only: the analyst keeps the run's own model.
        reply = self._chat("generator", iteration, messages, model=model)
        try:
            source = generator.extract_source(reply.text, self.spec.language, self.spec.entry,
                                              filename=self.spec.kernel_file, truncated=reply.truncated)
        except MalformedReply as exc:
            exc.reply = reply.text  # type: ignore[attr-defined]
            raise
        return Proposal(source=source, parent=parent.iteration if parent is not None else 0,
                        model=model or getattr(reply, "model", None))

    def observe_round(self, its: list[IterationRecord]) -> None:
        """The analyst reads the round's best accepted candidate once, with every result of the round in its
        list of what was tried."""
        accepted = [it for it in its if it.accepted]
        if accepted:
            self.analyse(max(accepted, key=lambda it: it.speedup or 0.0).iteration)

    def analyse(self, iteration: int) -> None:
        """Ask the analyst about the profile of `iteration` (0: the kernel as written)."""
        assert self.loop is not None
        record = self.loop.record
        speedup = record.best.speedup if (record.best and iteration) else None
        messages = analyst.build_messages(
            digest=self.loop.digest(iteration), hardware=self.loop.hardware_text, contract=self.contract,
            source=self.loop.source_of(iteration), language=self.spec.language,
            tried=record.tried(max(12, 2 * self.loop.parallel)),
            speedup=speedup)
        reply = self._chat("analyst", iteration, messages)
        try:
            items = analyst.parse_recommendations(reply.text)
        except MalformedReply as exc:
            # Advice is optional: keep the previous advice, spend no iteration.
            self.loop.trajectory.append("malformed", iteration=iteration, agent="analyst", feedback=exc.feedback)
            return
        self.loop.trajectory.append("recommendations", for_iteration=iteration, items=items)

    def _chat(self, agent: str, iteration: int, messages: list[dict[str, str]], model: str | None = None) -> Any:
        assert self.loop is not None
        trajectory = self.loop.trajectory
        trajectory.append("prompt", iteration=iteration, agent=agent, messages=messages)
        started = time.monotonic()
        try:
            reply = self.client.chat(messages, model=model)
        except Terminating as exc:
            trajectory.append("llm_error", iteration=iteration, agent=agent, kind=type(exc).__name__, message=str(exc))
            raise
        except MalformedReply:
            trajectory.append("reply", iteration=iteration, agent=agent, text="", prompt_tokens=0, completion_tokens=0,
                              usage=self.client.usage.to_dict(), llm_s=round(time.monotonic() - started, 3))
            raise
        trajectory.append("reply", iteration=iteration, agent=agent, text=reply.text, model=reply.model,
                          prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                          attempts=reply.attempts, finish_reason=reply.finish_reason,
                          usage_estimated=reply.usage_estimated, usage=self.client.usage.to_dict(),
                          llm_s=round(time.monotonic() - started, 3))
        return reply


# ------------------------------------------------------------------------------------------ the loop


@dataclass
class LoopOutcome:
    record: RunRecord
    mode: str
    report_dir: Path
    best_source: str | None = None
    stop_kind: str = ""
    stop_reason: str = ""

    @property
    def improved(self) -> bool:
        return self.record.best is not None and self.best_source is not None

    def how_found(self) -> dict[str, Any]:
        """The search in brief, in the keys `kforge_bot.bot.evidence.render_how_found` reads."""
        record = self.record
        start = record.start
        usage = record.usage or {}
        out: dict[str, Any] = {"generator": "LLM (KForge generator + analyst)" if self.mode == LLM else "built-in tuner"}
        if self.mode == LLM:
            out["model"] = ", ".join(record.models) or start.get("model") or "n/a"
            out["endpoint"] = start.get("endpoint", "n/a")
            out["tokens"] = usage.get("total_tokens", 0)
            out["prompt_tokens"] = usage.get("prompt_tokens", 0)
            out["completion_tokens"] = usage.get("completion_tokens", 0)
        out["iterations"] = record.iterations_used
        out["wall_s"] = round(record.wall_s, 1)
        out["stop_reason"] = self.stop_reason or "n/a"
        out["steps"] = [it.summary() for it in record.completed if it.accepted]
        rejected: dict[str, int] = {}
        for it in record.completed:
            if not it.accepted:
                key = "correct but not faster" if it.verdict == "pass" else it.verdict
                rejected[key] = rejected.get(key, 0) + 1
        out["rejected"] = rejected
        return out


class Loop:
    def __init__(self, spec: KernelSpec, target: str, proposer: Proposer, trajectory: Trajectory,
                 evaluator: Callable[[Implementation], tuple[EvalResult, float]], *, budgets: Budgets,
                 rules: StopRules, workload_model: WorkloadModel | None = None,
                 progress: Progress | None = None, clock: Callable[[], float] = time.monotonic,
                 parallel: int = 1, beam: int = 1, counters: Counters | None = None) -> None:
        self.spec = spec
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
        proposer.bind(self)

    @property
    def record(self) -> RunRecord:
        return self.trajectory.record

    # -- what the agents read -------------------------------------------------------------------

    def best_source(self) -> str:
        best = self.record.best
        return self.trajectory.read_source(best.file) if best and best.file else self.spec.baseline.source

    def source_of(self, iteration: int) -> str:
        it = self.record.iterations.get(iteration)
        return self.trajectory.read_source(it.file) if iteration and it and it.file else self.spec.baseline.source

    def digest(self, iteration: int) -> dict[str, Any]:
        """The profile digest of the baseline (0) or of a candidate, with its roofline position and time."""
        record = self.record
        result = record.result_for(iteration) or {}
        side = "baseline" if iteration == 0 else "candidate"
        digest = dict((result.get("profile") or {}).get(side) or {})
        position = roofline_position(result, side, record.workload, record.ceilings)
        if position:
            keep = ("achieved_gbs", "bandwidth_fraction", "achieved_tflops", "compute_fraction", "roofline_fraction",
                    "arithmetic_intensity", "ridge_intensity", "bound", "basis")
            roof = {k: position[k] for k in keep if position.get(k) not in (None, "", "unknown")}
            if position.get("ceilings"):
                roof["ceilings_origin"] = position["ceilings"].get("origin")
            digest["roofline"] = roof
        rows = (result.get("details") or {}).get("timing") or []
        if rows:
            digest["time_ms"] = (rows[0].get(side) or {}).get("median_ms")
            if len(rows) > 1:
                digest["time_ms_per_shape_set"] = [(r.get(side) or {}).get("median_ms") for r in rows]
        counters = record.counters.get(iteration) or {}
        if counters.get("available"):  # the hardware's own counters: per kernel, with the class they imply
            digest["ncu"] = counters["kernels"]
            digest["counters_tool"] = tool_title(counters)
            digest["ncu_summary"] = {k: counters["summary"].get(k) for k in ("class", "speed_of_light", "dominant")}
            before = record.counters.get(0) or {}
            if iteration and before.get("available"):
                digest["ncu_before"] = before["kernels"]
        return digest

    def _profile_counters(self, iteration: int, implementation: Implementation) -> None:
        """Hardware counters (ncu, unitrace) for the kernel as written (0) or an accepted candidate: between evaluations, never
        beside a timed run. The report folder's ncu-details.csv then holds the baseline and the best."""
        counters, record = self.counters, self.record
        if counters is None or iteration in record.counters:
            return
        if counters.reason is not None:
            if not record.counters_note:
                self.trajectory.append("counters", iteration=None, available=False, reason=counters.reason)
            return
        got = counters.collect(iteration, implementation, self.digest(iteration).get("time_ms"),
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
                               budgets=_plain(self.budgets), rules=_plain(self.rules))
        try:
            self.proposer.prepare()
            self._ensure_baseline()
            self.proposer.start()
            while True:
                self._check_stop()
                if self.parallel > 1 or len(self.record.pendings) > 1:
                    self._round()
                else:
                    self._step(self.record.next_iteration)
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
        record, budgets = self.record, self.budgets
        if record.iterations_used >= budgets.iterations:
            raise BudgetExhausted(f"iteration budget spent ({record.iterations_used} of {budgets.iterations})",
                                  budget="iterations")
        if budgets.time_limit_s is not None:
            elapsed, step = self.elapsed_s(), self._expected_step_s()
            if elapsed >= budgets.time_limit_s:
                raise BudgetExhausted(f"time limit reached ({elapsed:.0f} s of {budgets.time_limit_s:g} s)",
                                      budget="time")
            if elapsed + step > budgets.time_limit_s:  # an evaluation cannot be cut short: do not start one
                raise BudgetExhausted(f"time limit: {elapsed:.0f} s of {budgets.time_limit_s:g} s spent and a step "
                                      f"takes about {step:.0f} s", budget="time")
        spent = int((record.usage or {}).get("total_tokens", 0))
        if budgets.tokens is not None and spent >= budgets.tokens:
            raise BudgetExhausted(f"token budget spent ({spent} of {budgets.tokens})", budget="tokens")
        # Patience counts this session only: resuming a run that ran out of ideas asks for more tries.
        misses = min(record.since_progress, record.iterations_used - self._done_before)
        patience = self.rules.patience * self.parallel  # rounds of misses, counted in candidates
        if misses >= patience:
            raise NoProgress(f"no better candidate in the last {misses} iterations (patience {patience})")
        which = "best" if record.best else "baseline"
        position = record.position(which)
        fraction = (position or {}).get("roofline_fraction")
        if fraction is not None and fraction >= self.rules.roofline_fraction:
            subject = "the best candidate" if record.best else "the kernel as written"
            what = "roofline" if position and position.get("flops_known") else "peak bandwidth (compulsory traffic)"
            raise NearRoofline(f"{subject} reaches {fraction:.0%} of its {what}; the stop is at "
                               f"{self.rules.roofline_fraction:.0%}")
        summary = (record.counters.get(record.best.iteration if record.best else 0) or {}).get("summary") or {}
        light = summary.get("speed_of_light")
        if light is not None and light >= self.rules.speed_of_light:
            subject = "the best candidate" if record.best else "the kernel as written"
            raise NearRoofline(f"{subject} runs at {light:.0%} of its speed of light by the hardware's counters "
                               f"({summary.get('class')}, kernel {one_line(str(summary.get('dominant')), 60)}); the "
                               f"stop is at {self.rules.speed_of_light:.0%}")

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
        if baseline.get("verdict") == "pass":
            self._profile_counters(0, self.spec.baseline)
        if baseline.get("verdict") != "pass":
            raise KforgeError(
                f"the kernel as written fails its own check ({baseline.get('verdict')}: "
                f"{one_line(str(baseline.get('reason', '')), 300)})", path=self.spec.kernel_path,
                hint="run `kforge-bot check` on it to see why; optimizing needs a correct starting point")
        if record.workload is None:
            self.trajectory.append("workload", **self._workload())
        device = str(baseline.get("device_name") or "")
        facts, ceilings, origin_note = hardware_context(self.target, device)
        if record.ceilings is None and not any(e.get("event") == "ceilings" for e in self.trajectory.events):
            self.trajectory.append("ceilings", ceilings=ceilings, device_name=device, note=origin_note,
                                   runner=facts.name if facts else None)
        self.hardware_text = hardware_text(self.target, device, facts, self.record.ceilings)

    def _workload(self) -> dict[str, Any]:
        from kforge_bot.optimize.trajectory import output_bytes

        shapes = list(self.spec.shape_sets)
        if self.workload_model is not None:
            rows = []
            for shape in shapes:
                moved, flops = self.workload_model(shape)
                rows.append({"bytes": moved, "flops": flops})
            return {"shape_sets": rows, "basis": "the caller's workload model (bytes moved and FLOPs per call)"}
        outputs = output_bytes(self.record.baseline)
        # The reference's evaluation child sizes the inputs it makes (repository code never runs here).
        inputs = ((self.record.baseline or {}).get("details") or {}).get("input_bytes")
        counted = ((self.record.baseline or {}).get("profile") or {}).get("reference_flops") or []
        rows = []
        for i in range(len(shapes)):
            in_b = inputs[i] if inputs and i < len(inputs) else None
            out_b = outputs[i] if i < len(outputs) else None
            total = in_b + out_b if in_b is not None and out_b is not None else None
            rows.append({"bytes": total, "input_bytes": in_b, "output_bytes": out_b,
                         "flops": counted[i] if i < len(counted) else None})
        basis = "compulsory traffic: every input read once and every output written once (module parameters not counted)"
        if rows and all(r["flops"] is not None for r in rows):
            basis += "; FLOPs: the framework profiler's count for the reference's ops (matmuls, convolutions, ...)"
        data: dict[str, Any] = {"shape_sets": rows, "basis": basis}
        if not inputs:
            data["error"] = "the baseline's result does not say the inputs' sizes"
        return data

    def _step(self, iteration: int) -> None:
        started = self.clock()
        record = self.record
        pending = record.pending
        if pending is not None and pending.iteration == iteration and pending.file:
            # The run stopped between writing this candidate and judging it: judge it now, spend nothing new.
            proposal = Proposal(self.trajectory.read_source(pending.file), pending.change, pending.assignment)
        else:
            try:
                proposal = self.proposer.propose(iteration)
            except NonTerminating as exc:
                self._record_malformed(exc, iteration, started)
                return
            suffix = Path(self.spec.kernel_file).suffix or ".py"
            rel = self.trajectory.write_source(f"{iteration:04d}{suffix}", proposal.source)
            self.trajectory.append("candidate", iteration=iteration, file=rel, sha256=sha256(proposal.source),
                                   change=proposal.change, assignment=proposal.assignment)
        digest = sha256(proposal.source)
        earlier = next((it for it in record.completed if it.sha256 == digest and it.result is not None), None)
        if earlier is not None:
            result, eval_s, duplicate_of = EvalResult.from_dict(earlier.result or {}), 0.0, earlier.iteration
        else:
            result, eval_s = self.evaluator(self.spec.candidate_from_source(proposal.source))
            duplicate_of = None
        it = self._record_result(iteration, proposal.source, result, eval_s, started, self._accepts(result),
                                 duplicate_of=duplicate_of)
        self.proposer.observe(it)

    def _record_result(self, iteration: int, source: str, result: EvalResult, eval_s: float, started: float,
                       accepted: bool, *, judging_since: float | None = None, loop_s_before: float = 0.0,
                       **extra: Any) -> IterationRecord:
        """Append a candidate's result (with the generator's feedback when it is not accepted) and keep an
        accepted source as best<suffix>. With `judging_since` (a parallel round) the loop's own time for the
        candidate is recorded too: `loop_s_before` plus the judging up to this append."""
        result_dict = result.to_dict()
        history = None if accepted else generator.failure_from_result(result_dict, iteration=iteration,
                                                                       source=source)
        if judging_since is not None:
            extra["loop_s"] = round(loop_s_before + (self.clock() - judging_since), 4)
        self.trajectory.append("result", iteration=iteration, result=result_dict, accepted=accepted,
                               eval_s=round(eval_s, 3), iteration_s=round(self.clock() - started, 3),
                               history_entry=history, **extra)
        if accepted:
            suffix = Path(self.spec.kernel_file).suffix or ".py"
            (self.trajectory.root / f"best{suffix}").write_text(source, encoding="utf-8")
            if judging_since is None:  # a parallel round profiles its best once all of its evaluations are done
                self._profile_counters(iteration, self.spec.candidate_from_source(source))
        return self.record.iterations[iteration]

    def _record_malformed(self, exc: NonTerminating, iteration: int, started: float, **extra: Any) -> None:
        """A generator reply with no usable kernel: the iteration is spent, its feedback goes to the history."""
        feedback = getattr(exc, "feedback", str(exc))
        malformed = generator.failure_from_malformed(
            exc if isinstance(exc, MalformedReply) else MalformedReply(feedback), iteration=iteration,
            reply=getattr(exc, "reply", None))
        self.trajectory.append("malformed", iteration=iteration, agent="generator", feedback=feedback,
                               history_entry=malformed, iteration_s=round(self.clock() - started, 3), **extra)

    def _round(self) -> None:
        """One parallel round: propose up to `parallel` candidates (each goes to the pool as soon as it is
        written, so evaluation overlaps the next proposal), then judge them in order. The loop's own time
        per candidate (everything but waiting for the model and for evaluations) is measured as loop_s."""
        record = self.record
        round_start = self.clock()
        round_no = record.rounds + 1
        budget = self.budgets.iterations - record.iterations_used
        submit = getattr(self.evaluator, "submit", None)
        entries: list[dict[str, Any]] = []
        stop: Terminating | None = None
        suffix = Path(self.spec.kernel_file).suffix or ".py"

        def launch(entry: dict[str, Any]) -> None:
            proposal = entry["proposal"]
            digest = sha256(proposal.source)
            earlier = next((it for it in record.completed if it.sha256 == digest and it.result is not None), None)
            twin = next((e for e in entries if e is not entry and e.get("digest") == digest), None)
            entry["digest"] = digest
            if earlier is not None:
                entry["duplicate_of"], entry["done"] = earlier.iteration, (EvalResult.from_dict(earlier.result or {}), 0.0)
            elif twin is not None:
                entry["duplicate_of"], entry["twin"] = twin["iteration"], twin
            else:
                impl = self.spec.candidate_from_source(proposal.source)
                entry["future"] = submit(impl) if submit is not None else None
                if entry["future"] is None:
                    entry["done"] = self.evaluator(impl)

        pendings = record.pendings
        if pendings:  # a stopped round: judge what it wrote, propose nothing new
            for it in pendings:
                t0 = self.clock()
                entry = {"iteration": it.iteration, "start": t0, "llm_s": 0.0,
                         "proposal": Proposal(self.trajectory.read_source(it.file or ""), it.change, it.assignment,
                                              it.parent, it.model)}
                entries.append(entry)
                launch(entry)
                entry["loop_s"] = self.clock() - t0
            round_no = max((it.round or 0) for it in pendings) or round_no
        else:
            taken: list[dict[str, int]] = []
            for slot in range(min(self.parallel, budget)):
                iteration = record.fresh_iteration
                t0 = self.clock()
                llm_before = self._llm_seconds(iteration)
                try:
                    proposal = self.proposer.propose_for(iteration, slot, taken)  # type: ignore[attr-defined]
                except NonTerminating as exc:
                    self._record_malformed(exc, iteration, t0, round=round_no)
                    continue
                except Terminating as exc:
                    if not entries:
                        raise
                    stop = exc  # judge what this round already launched, then stop
                    break
                if proposal is None:
                    break
                if proposal.assignment:
                    taken.append(dict(proposal.assignment))
                rel = self.trajectory.write_source(f"{iteration:04d}{suffix}", proposal.source)
                self.trajectory.append("candidate", iteration=iteration, file=rel, sha256=sha256(proposal.source),
                                       change=proposal.change, assignment=proposal.assignment, round=round_no,
                                       parent=proposal.parent, model=proposal.model)
                llm_s = self._llm_seconds(iteration) - llm_before
                entry = {"iteration": iteration, "start": t0, "llm_s": llm_s, "proposal": proposal}
                entries.append(entry)
                launch(entry)
                entry["loop_s"] = max(0.0, self.clock() - t0 - llm_s)

        judged: list[IterationRecord] = []
        for entry in entries:
            if "twin" in entry:  # the same source twice in one round: evaluated once, the twin costs nothing
                twin = entry["twin"]
                result, _ = twin["done"] if "done" in twin else twin["future"].result()
                entry["done"] = (result, 0.0)
            elif "done" not in entry:
                entry["done"] = entry["future"].result()  # waiting on the pool is not the loop's time
            t1 = self.clock()
            result, eval_s = entry["done"]
            accepted = self._accepts(result) if entry.get("duplicate_of") is None else False
            judged.append(self._record_result(entry["iteration"], entry["proposal"].source, result, eval_s,
                                              entry["start"], accepted, judging_since=t1,
                                              loop_s_before=entry.get("loop_s", 0.0),
                                              duplicate_of=entry.get("duplicate_of"), round=round_no))
        best = self.record.best
        if best is not None and any(it.iteration == best.iteration for it in judged):
            # Every evaluation of the round has returned: ncu runs beside no timed run.
            self._profile_counters(best.iteration, self.spec.candidate_from_source(self.best_source()))
        observe_round = getattr(self.proposer, "observe_round", None)
        if observe_round is not None:
            observe_round(judged)
        else:
            for it in judged:
                self.proposer.observe(it)
        self._round_walls.append(self.clock() - round_start)
        if stop is not None:
            raise stop

    def _llm_seconds(self, iteration: int) -> float:
        it = self.record.iterations.get(iteration)
        return it.llm_s if it is not None else 0.0

    def _accepts(self, result: EvalResult) -> bool:
        """Correct and faster than the kernel as written with confidence, and better than the best so far."""
        if not result.faster or result.speedup is None:
            return False
        best = self.record.best
        return best is None or best.speedup is None or result.speedup > best.speedup * (1.0 + self.rules.min_gain)


# ------------------------------------------------------------------------------------------ hardware


def hardware_context(target: str, device_name: str) -> tuple[Any, dict[str, Any] | None, str]:
    """(runner facts or None, ceilings as a dict or None, where the ceilings come from).

    Ceilings in order of preference: this machine's own measurement (`kforge-bot doctor --save`), the
    project's measurement of the machine class, the datasheet."""
    from kforge_bot.hardware import ceilings_for, facts_for

    facts = None
    try:
        facts = facts_for(target, device_name) if device_name else None
        found = ceilings_for(target, device_name) if device_name else None
    except KforgeError as exc:
        return facts, None, f"ceilings unreadable: {exc}"
    if found is not None and found.origin == "measured":
        return facts, found.to_dict(), found.source
    reference = facts.reference_ceilings() if facts is not None else None
    chosen = reference or found
    if chosen is None:
        return facts, None, (f"no ceilings known for {device_name or target}: run `kforge-bot doctor --save` on this "
                             "machine to measure them")
    return facts, chosen.to_dict(), chosen.source


def hardware_text(target: str, device_name: str, facts: Any, ceilings: dict[str, Any] | None) -> str:
    lines = [facts.prompt_text()] if facts is not None else [f"Device: {device_name or 'unknown'} (target '{target}')."]
    if facts is not None and device_name:
        lines.append(f"- this machine reports: {device_name}")
    if ceilings:
        parts = []
        if ceilings.get("bandwidth_gbs"):
            parts.append(f"memory bandwidth {ceilings['bandwidth_gbs']:g} GB/s")
        parts += [f"{p} {v:g} TFLOP/s" for p, v in sorted((ceilings.get("tflops") or {}).items())]
        if parts:
            lines.append(f"- roofline ceilings ({ceilings.get('origin')}): " + ", ".join(parts))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ a whole run


@dataclass
class RunConfig:
    """Everything a run is started with (what `optimize` reads from flags and the policy)."""

    target: str
    budgets: Budgets = field(default_factory=Budgets)
    rules: StopRules | None = None  # None: quick_rules(mode)
    settings: EvalSettings = field(default_factory=quick_settings)
    endpoint: Any = None  # kforge_bot.agents.llm.Endpoint; None: the built-in tuner
    references: Sequence[dict[str, Any]] = ()
    workload_model: WorkloadModel | None = None
    cpu_count: int | None = None
    client_factory: Callable[..., Any] | None = None  # tests and embedders: build the LLMClient themselves
    parallel: int = 1  # candidates per round, evaluated at once (kforge_bot.scale)
    beam: int = 1  # correct candidates carried forward as parents
    models: Sequence[str] = ()  # several models take turns writing a round's candidates
    executor: str = "local"  # "local" (a pool of this host's devices) or "ray"
    workers: int | None = None  # evaluation slots (default: every GPU; 1 on the CPU)
    ray_address: str | None = None
    pool: Any = None  # an evaluation pool the caller made (tests, benchmarks); closed by its owner
    cache_dir: str | Path | None = None  # the result cache's folder; None: no cache
    languages: Sequence[str] | None = None  # the policy's: candidates in other languages are rejected unrun
    counters: str = "auto"  # ncu for the baseline and accepted candidates: auto (where it can), off, full (+ .ncu-rep)
    speed_of_light: float | None = None  # the policy's stop (budgets.speed_of_light); None: the rules' own
    patience: int | None = None  # --patience or budgets.patience; None: the mode's own (quick_rules)


class OptimizeRun:
    """One session of a run: `open` (new or resumed), `run`, then `finish` (end event and report)."""

    def __init__(self, spec: KernelSpec, trajectory: Trajectory, loop: Loop, evaluator: Evaluator, mode: str,
                 config: RunConfig) -> None:
        self.spec = spec
        self.trajectory = trajectory
        self.loop = loop
        self.evaluator = evaluator
        self.mode = mode
        self.config = config
        self.outcome: LoopOutcome | None = None
        self.own_pool: Any = None  # a pool this run made, closed when it ends

    @classmethod
    def open(cls, spec: KernelSpec, config: RunConfig, report_dir: str | Path, *, resume: bool = False,
             progress: Progress | None = None) -> OptimizeRun:
        report_dir = Path(report_dir)
        mode = TUNER if config.endpoint is None else LLM
        if config.languages is not None and spec.format == "manifest" and spec.language not in config.languages:
            raise KforgeError(f"kernel {spec.name!r} is written in {spec.language}, and the policy allows candidates "
                              f"only in {', '.join(config.languages)}: none of its candidates could be accepted",
                              path=Path(spec.root) / spec.kernel_file,
                              hint=f"add {spec.language} to the policy's `languages`, or optimize a kernel written in one "
                                   "of those")
        if resume:
            trajectory = Trajectory.open(report_dir)
            spec = _check_resumable(spec, trajectory, mode, config.target)
        else:
            trajectory = Trajectory.create(report_dir)
        rules = config.rules or quick_rules(mode)
        if config.speed_of_light is not None:
            rules = replace(rules, speed_of_light=config.speed_of_light)
        if config.patience is not None:
            rules = replace(rules, patience=config.patience)
        proposer: Any
        if mode == TUNER:
            proposer = TunerProposer(spec, cpu_count=config.cpu_count, min_gain=rules.min_gain)
        else:
            from kforge_bot.agents.llm import LLMClient

            factory = config.client_factory or (lambda endpoint, token_budget: LLMClient(endpoint, token_budget=token_budget))
            client = factory(config.endpoint, token_budget=config.budgets.tokens)
            proposer = LLMProposer(client, spec, config.target, references=config.references,
                                   models=config.models if len(config.models) > 1 else ())
        if not resume:
            suffix = Path(spec.kernel_file).suffix or ".py"
            baseline_file = trajectory.write_source(f"baseline{suffix}", spec.baseline.source)
            trajectory.append("start", schema=SCHEMA, kernel=spec.name, format=spec.format, root=spec.root,
                              kernel_file=spec.kernel_file, entry=spec.entry, language=spec.language,
                              target=config.target, mode=mode, baseline_file=baseline_file,
                              baseline_sha256=sha256(spec.baseline.source), settings=config.settings.to_dict(),
                              budgets=_plain(config.budgets), rules=_plain(rules),
                              endpoint=proposer.describe().get("endpoint"), model=proposer.describe().get("model"),
                              references=[r.get("note") or r.get("file") for r in config.references])
        cache = fingerprint = None
        if config.cache_dir is not None:
            from kforge_bot.cache import ResultCache, probe_fingerprint

            cache, fingerprint = ResultCache(config.cache_dir), probe_fingerprint(config.target)
        pool, own_pool = config.pool, False
        if pool is None and (config.parallel > 1 or config.executor == "ray" or config.workers):
            from kforge_bot.scale import make_pool

            pool, own_pool = make_pool(config.target, executor=config.executor, workers=config.workers,
                                       ray_address=config.ray_address), True
        evaluator = Evaluator(spec, config.target, config.settings, pool=pool, cache=cache, fingerprint=fingerprint,
                              languages=config.languages)
        evaluator.progress = progress
        counters = Counters(spec, config.target, config.settings, trajectory.root, config.counters)
        loop = Loop(spec, config.target, proposer, trajectory, evaluator, budgets=config.budgets, rules=rules,
                    workload_model=config.workload_model, progress=progress,
                    parallel=config.parallel, beam=config.beam, counters=counters)
        run = cls(spec, trajectory, loop, evaluator, mode, config)
        run.own_pool = pool if own_pool else None
        return run

    def run(self) -> LoopOutcome:
        stopped_early = True
        try:
            kind, reason = self.loop.run()
            stopped_early = False
        finally:
            self.evaluator.close()
            if self.own_pool is not None:
                # Interrupted (Ctrl-C) or failed: evaluations still in the pool are not waited for; the
                # trajectory keeps their candidates as pending, judged on --resume.
                abort = getattr(self.own_pool, "abort", None) if stopped_early else None
                (abort or self.own_pool.close)()
                self.own_pool = None
        record = self.trajectory.record
        best_source = self.loop.best_source() if record.best else None
        self.outcome = LoopOutcome(record=record, mode=self.mode, report_dir=self.trajectory.root,
                                   best_source=best_source, stop_kind=kind, stop_reason=reason)
        return self.outcome

    def finish(self, *, written_to: str | None = None, note: str | None = None) -> Any:
        """Record the session's end and write report.md and plot.png; returns kforge_bot.optimize.report.ReportFiles."""
        from kforge_bot.optimize.report import write_report

        record = self.trajectory.record
        self.trajectory.append("end", written_to=written_to, note=note,
                               best_iteration=record.best.iteration if record.best else None,
                               best_speedup=record.best.speedup if record.best else None,
                               usage=record.usage or None)
        return write_report(self.trajectory.root, self.trajectory.record)


def _check_resumable(spec: KernelSpec, trajectory: Trajectory, mode: str, target: str) -> KernelSpec:
    """The spec to continue with: the run's own kernel, as it was when the run started."""
    start = trajectory.record.start
    where = trajectory.path
    if start.get("kernel") != spec.name or start.get("kernel_file") != spec.kernel_file:
        raise KforgeError(f"this run optimized kernel {start.get('kernel')!r} ({start.get('kernel_file')}), "
                          f"not {spec.name!r}", path=where, hint="pass the same FILE and --kernel as the first time")
    if start.get("mode") != mode:
        want = "an LLM endpoint (OPENAI_BASE_URL / OPENAI_API_KEY or --base-url)" if start.get("mode") == LLM else \
            "no LLM endpoint (unset OPENAI_BASE_URL and OPENAI_API_KEY)"
        raise KforgeError(f"this run used the {'LLM generator' if start.get('mode') == LLM else 'built-in tuner'}; "
                          f"resuming it needs {want}", path=where)
    if start.get("target") != target:
        raise KforgeError(f"this run measured on target {start.get('target')!r}, not {target!r}", path=where,
                          hint=f"resume with --target {start.get('target')}")
    original = trajectory.read_source(start["baseline_file"])
    on_disk = spec.baseline.source
    if sha256(on_disk) == start.get("baseline_sha256"):
        return spec
    best = trajectory.record.best
    if best is not None and best.sha256 == sha256(on_disk):
        # The run already wrote its best in place (--write): keep measuring against the kernel as written.
        def swap(impl: Implementation) -> Implementation:
            return replace(impl, source=original) if impl.source == on_disk else impl
        return replace(spec, baseline=swap(spec.baseline), reference=swap(spec.reference),
                       inputs_source=swap(spec.inputs_source))
    raise KforgeError(f"{spec.kernel_file} changed since this run started", path=spec.kernel_path,
                      hint="restore it, or start a new run on the new version")


def _plain(obj: Any) -> dict[str, Any]:
    return {k: getattr(obj, k) for k in obj.__dataclass_fields__}




def default_cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
