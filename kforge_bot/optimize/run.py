"""One optimize run as the commands start it: its configuration, its sessions (new or resumed), its outcome."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot.agents.llm import LLMClient
from kforge_bot.cache import ResultCache
from kforge_bot.config.policy import Budgets, Policy
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.references import Progress
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.optimize.counters import Counters
from kforge_bot.optimize.evaluator import HarnessEvaluator
from kforge_bot.optimize.llm_proposer import LLMProposer
from kforge_bot.optimize.loop import Loop
from kforge_bot.optimize.protocols import LLM, TUNER, Proposer
from kforge_bot.optimize.record import RunRecord
from kforge_bot.optimize.report import ReportFiles, write_report
from kforge_bot.optimize.roofline import WorkloadModel
from kforge_bot.optimize.stops import StopRules, quick_rules
from kforge_bot.optimize.trajectory import SCHEMA, Trajectory, sha256
from kforge_bot.optimize.tuner_proposer import TunerProposer
from kforge_bot.scaleout import make_pool
from kforge_bot.scaleout.compile_ahead import needs_build
from kforge_bot.kernelspec import Implementation, KernelSpec
from kforge_bot.targets.fingerprint import probe_fingerprint


def quick_settings() -> EvalSettings:
    """Evaluation when no policy is given (the default policy's quick look): the quickstart's CPU example in a few
    minutes."""
    return Policy().eval_settings("optimize", quick=True)


@dataclass
class OptimizeOutcome:
    """What a session of an optimize run (`OptimizeRun.run`) ended with: the record, the best source (when one beat
    the kernel as written) and why it stopped."""

    record: RunRecord
    proposer_kind: str  # TUNER or LLM (kforge_bot.optimize.protocols)
    report_dir: Path
    best_source: str | None = None
    stop_kind: str = ""
    stop_reason: str = ""

    @property
    def improved(self) -> bool:
        return self.record.best is not None and self.best_source is not None

    def how_found(self) -> dict[str, Any]:
        """The search in brief, in the keys `kforge_bot.prbot.evidence.render_how_found` reads."""
        record = self.record
        start = record.start
        usage = record.usage or {}
        llm = self.proposer_kind == LLM
        out: dict[str, Any] = {"generator": "LLM (KForge generator + analyst)" if llm else "built-in tuner"}
        if llm:
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


@dataclass
class RunConfig:
    """Everything a run is started with (what `optimize` reads from flags and the policy)."""

    target: str
    budgets: Budgets = field(default_factory=Budgets)
    rules: StopRules | None = None  # None: quick_rules(proposer_kind, budgets)
    settings: EvalSettings = field(default_factory=quick_settings)
    endpoint: Any = None  # kforge_bot.agents.llm.Endpoint; None: the built-in tuner
    references: Sequence[dict[str, Any]] = ()
    workload_model: WorkloadModel | None = None
    cpu_count: int | None = None
    client_factory: Callable[..., Any] | None = None  # tests and embedders: build the LLMClient themselves
    parallel: int = 1  # candidates per round, evaluated at once (kforge_bot.scaleout)
    beam: int = 1  # correct candidates carried forward as parents
    models: Sequence[str] = ()  # several models take turns writing a round's candidates
    executor: str = "local"  # "local" (a pool of this host's devices) or "ray"
    workers: int | None = None  # evaluation slots (default: every GPU; 1 on the CPU)
    ray_address: str | None = None
    pool: Any = None  # an evaluation pool the caller made (tests, benchmarks); closed by its owner
    cache_dir: str | Path | None = None  # the result cache's folder; None: no cache
    languages: Sequence[str] | None = None  # the policy's: candidates in other languages are rejected unrun
    counters: str = "auto"  # ncu for the baseline and accepted candidates: auto (where it can), off, full (+ .ncu-rep)
    baselines: tuple[str, ...] = ("eager",)  # the policy's baseline (or --baseline): compiled ones are measured too

    @classmethod
    def from_policy(cls, policy: Policy, spec: KernelSpec, target: str, *, command: str, quick: bool = False,
                    endpoint: Any = None, models: Sequence[str] = (), iterations: int | None = None,
                    tokens: int | None = None, time_limit_s: float | None = None, patience: int | None = None,
                    **flags: Any) -> RunConfig:
        """The one way a run is configured from a policy, for `kforge-bot optimize` and the PR bot alike: the
        policy's budgets (a run without a model spends no tokens), its evaluation settings for `command` (quick: the
        quick look) with the kernel's gate rule (which shape set counts as a regression, as in check and the gate),
        its languages and baselines. Budget arguments and `flags` (EvalSettings fields) left None take the
        policy's."""
        given = policy.budgets
        budgets = replace(given, iterations=iterations or given.iterations,
                          tokens=(tokens or given.tokens) if endpoint is not None else None,
                          time_limit_s=time_limit_s or given.time_limit_s, patience=patience or given.patience)
        settings = policy.eval_settings(command, quick=quick, rule=policy.rule_for(spec.name, spec.kernel_file, target),
                                        **flags)
        return cls(target=target, budgets=budgets, settings=settings, endpoint=endpoint, languages=policy.languages,
                   models=list(models), baselines=policy.baseline)


class OptimizeRun:
    """One session of a run: `open` (new or resumed), `run`, then `finish` (end event and report)."""

    def __init__(self, spec: KernelSpec, trajectory: Trajectory, loop: Loop, evaluator: HarnessEvaluator, proposer_kind: str,
                 config: RunConfig) -> None:
        self.spec = spec
        self.trajectory = trajectory
        self.loop = loop
        self.evaluator = evaluator
        self.proposer_kind = proposer_kind  # TUNER or LLM
        self.config = config
        self.outcome: OptimizeOutcome | None = None
        self.own_pool: Any = None  # a pool this run made, closed when it ends

    @classmethod
    def open(cls, spec: KernelSpec, config: RunConfig, report_dir: str | Path, *, resume: bool = False,
             progress: Progress | None = None) -> OptimizeRun:
        report_dir = Path(report_dir)
        proposer_kind = TUNER if config.endpoint is None else LLM
        if config.languages is not None and spec.format == "manifest" and spec.language not in config.languages:
            raise KforgeError(f"kernel {spec.name!r} is written in {spec.language}, and the policy allows candidates "
                              f"only in {', '.join(config.languages)}: none of its candidates could be accepted",
                              path=Path(spec.root) / spec.kernel_file,
                              hint=f"add {spec.language} to the policy's `languages`, or optimize a kernel written in one "
                                   "of those")
        if resume:
            trajectory = Trajectory.open(report_dir)
            spec = _check_resumable(spec, trajectory, proposer_kind, config.target)
        else:
            trajectory = Trajectory.create(report_dir)
        rules = config.rules or quick_rules(proposer_kind, config.budgets)
        proposer: Proposer
        if proposer_kind == TUNER:
            proposer = TunerProposer(spec, cpu_count=config.cpu_count, min_gain=rules.min_gain)
        else:
            factory = config.client_factory or (lambda endpoint: LLMClient(endpoint, timeout=endpoint.timeout_s))
            client = factory(config.endpoint)  # the token budget is the loop's (stops.tokens_spent)
            proposer = LLMProposer(client, spec, config.target, references=config.references,
                                   models=config.models if len(config.models) > 1 else ())
        if not resume:
            suffix = Path(spec.kernel_file).suffix or ".py"
            baseline_file = trajectory.write_source(f"baseline{suffix}", spec.baseline.source)
            described = proposer.describe()
            trajectory.append("start", schema=SCHEMA, kernel=spec.name, format=spec.format, root=spec.root,
                              kernel_file=spec.kernel_file, entry=spec.entry, language=spec.language,
                              target=config.target, mode=proposer_kind, baseline_file=baseline_file,
                              baseline_sha256=sha256(spec.baseline.source), settings=config.settings.to_dict(),
                              budgets=config.budgets.limits(), rules=asdict(rules),
                              endpoint=described.get("endpoint"), endpoint_url=described.get("endpoint_url"),
                              model=described.get("model"),
                              references=[r.get("note") or r.get("file") for r in config.references])
        cache = fingerprint = None
        if config.cache_dir is not None:
            cache, fingerprint = ResultCache(config.cache_dir), probe_fingerprint(config.target)
        pool, own_pool = config.pool, False
        # A kernel that builds a torch extension gets a pool even when candidates come one at a time: the pool
        # builds the kernel as written once (and each candidate ahead, in the sandbox), where a bare evaluation
        # builds the kernel as written again in every candidate's worker (about 50 s of CUDA C++ on the H200).
        if pool is None and (config.parallel > 1 or config.executor == "ray" or config.workers
                             or needs_build(spec.baseline.source)):
            pool, own_pool = make_pool(config.target, executor=config.executor, workers=config.workers,
                                       ray_address=config.ray_address), True
        evaluator = HarnessEvaluator(spec, config.target, config.settings, pool=pool, cache=cache, fingerprint=fingerprint,
                              languages=config.languages)
        evaluator.progress = progress
        counters = Counters(spec, config.target, config.settings, trajectory.root, config.counters)
        loop = Loop(spec, config.target, proposer, trajectory, evaluator, budgets=config.budgets, rules=rules,
                    workload_model=config.workload_model, parallel=config.parallel, beam=config.beam,
                    counters=counters, baselines=config.baselines)
        run = cls(spec, trajectory, loop, evaluator, proposer_kind, config)
        run.own_pool = pool if own_pool else None
        return run

    def run(self) -> OptimizeOutcome:
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
        self.outcome = OptimizeOutcome(record=record, proposer_kind=self.proposer_kind, report_dir=self.trajectory.root,
                                       best_source=best_source, stop_kind=kind, stop_reason=reason)
        return self.outcome

    def finish(self, *, written_to: str | None = None, note: str | None = None) -> ReportFiles:
        """Record the session's end and write report.md and plot.png."""
        record = self.trajectory.record
        self.trajectory.append("end", written_to=written_to, note=note,
                               best_iteration=record.best.iteration if record.best else None,
                               best_speedup=record.best.speedup if record.best else None,
                               usage=record.usage or None)
        return write_report(self.trajectory.root, self.trajectory.record)


def _check_resumable(spec: KernelSpec, trajectory: Trajectory, proposer_kind: str, target: str) -> KernelSpec:
    """The spec to continue with: the run's own kernel, as it was when the run started."""
    start = trajectory.record.start
    where = trajectory.path
    if start.get("kernel") != spec.name or start.get("kernel_file") != spec.kernel_file:
        raise KforgeError(f"this run optimized kernel {start.get('kernel')!r} ({start.get('kernel_file')}), "
                          f"not {spec.name!r}", path=where, hint="pass the same FILE and --kernel as the first time")
    if start.get("mode") != proposer_kind:  # the start event's key for it, since the first runs
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


def default_cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
