"""One kernel optimized as `kforge-bot optimize` asks: the request checked before any work, the run's config from
the policy and the flags, the run with its live display, the best candidate checked end to end (--workload) and
written, and the outcome on the console and as JSON."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from kforge_bot.agents.llm import LLMClient, configured, endpoint_from_env
from kforge_bot.config.policy import load_policy
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.isolation import announcement
from kforge_bot.evaluate.wire.shapes import DEFINITION, text_lines
from kforge_bot.gate.decision import FAILING
from kforge_bot.machine.cache_dirs import user_cache_dir
from kforge_bot.machine.writable import folder_refusal, write_refusal
from kforge_bot.optimize.display import Display
from kforge_bot.optimize.protocols import LLM, TUNER
from kforge_bot.optimize.report import ReportFiles
from kforge_bot.optimize.run import OptimizeOutcome, OptimizeRun, RunConfig, default_cpu_count
from kforge_bot.optimize.trajectory import TRAJECTORY_FILE, read_events
from kforge_bot.optimize.tuner_proposer import TunerProposer
from kforge_bot.kernelspec import KernelSpec, kernel_implementation, load_spec, parse_python
from kforge_bot.kernelspec.kernels import sibling_references
from kforge_bot.targets import choose_target
from kforge_bot.workloads.candidate import candidate_end_to_end, find_workload
from kforge_bot.workloads.gate import WorkloadReport
from kforge_bot.workloads.spec import WorkloadSpec


@dataclass(frozen=True)
class OptimizeRequest:
    """What `kforge-bot optimize` was asked (None: the policy's, the environment's or the resumed run's)."""

    file: Path
    kernel: str | None
    target: str
    models: tuple[str, ...]
    iterations: int | None
    budget_tokens: int | None
    time_limit: float | None
    patience: int | None
    out_path: Path | None
    write_in_place: bool
    report_dir: Path | None
    resume_dir: Path | None
    base_url: str | None
    api_key: str | None
    policy_path: str | None
    parallel: int
    beam: int
    workers: int | None
    executor: str
    ray_address: str | None
    cache_dir: Path | None
    no_cache: bool
    seeds: int | None
    timeout: float | None
    allow_fallback: bool
    max_tokens: int | None
    counters: str
    baselines: tuple[str, ...]
    workload_name: str | None
    workload_accept: bool


def optimize_kernel(request: OptimizeRequest, console: Console, save_json: Callable[[dict[str, Any]], None]) -> int:
    """Optimize one kernel; returns the exit code (1: the LLM endpoint failed before any iteration ran)."""
    spec, workload, recorded = _checked(request)
    # A resumed run stays on the device it started on, unless another is named.
    recorded_target = recorded.get("target")
    target = recorded_target if request.target == "auto" and recorded_target else request.target
    kind = choose_target(target).device_kind(spec.targets)
    config = _config(request, spec, kind, recorded)
    folder = request.resume_dir or request.report_dir or \
        Path(tempfile.mkdtemp(prefix=f"kforge-optimize-{spec.name}-"))
    run, outcome = _run(request, spec, kind, config, folder, console)
    end_to_end = _end_to_end(request, spec, workload, outcome, kind, console)
    refused = request.workload_accept and end_to_end is not None and end_to_end.verdict in FAILING
    written = None if refused else _write_best(outcome, spec.kernel_path if request.write_in_place else
                                               request.out_path)
    note = None if outcome.improved else "no candidate beat the kernel as written; the original was left untouched"
    if refused:
        note = (f"the best candidate was not written: workload {request.workload_name} is {end_to_end.verdict} end "
                "to end")
    files = run.finish(written_to=written, note=note)
    _print_outcome(console, run, outcome, files, written, spec.kernel_file, request.out_path is not None)
    _print_how_to_continue(console, request, outcome, folder)
    record = outcome.record
    best = record.best if outcome.improved else None
    save_json({"kernel": spec.name, "target": kind, "mode": run.proposer_kind, "improved": outcome.improved,
               "best": None if best is None else {"iteration": best.iteration, "speedup": best.speedup,
                                                  "speedup_ci": best.speedup_ci, "change": best.change,
                                                  "per_shape": [p.to_dict() for p in best.per_shape]},
               "written_to": written, "workload": None if end_to_end is None else end_to_end.to_dict(),
               "iterations": record.iterations_used, "stop": outcome.stop_kind,
               "stop_reason": outcome.stop_reason, "report_dir": str(folder), "report": str(files.markdown)})
    return 1 if outcome.stop_kind in ("LLMUnavailable", "ContextLengthExceeded") and record.iterations_used == 0 else 0


def _checked(request: OptimizeRequest) -> tuple[KernelSpec, WorkloadSpec | None, dict[str, Any]]:
    """The kernel, the workload (--workload) and the resumed run's start, each refused before any work."""
    if request.out_path is not None and request.write_in_place:
        raise KforgeError("--out and --write exclude each other", hint="choose where the best candidate goes")
    resume_dir, report_dir = request.resume_dir, request.report_dir
    if resume_dir is not None and report_dir is not None and resume_dir.resolve() != report_dir.resolve():
        raise KforgeError("--resume continues the run in its own folder; drop --report or give the same folder")
    spec = load_spec(request.file, request.kernel)
    if request.write_in_place and spec.format == "kernelbench":
        raise KforgeError("--write would replace the problem's reference Model with a candidate", path=spec.kernel_path,
                          hint="for a KernelBench problem, write the candidate (ModelNew) with --out")
    if request.workload_accept and request.workload_name is None:
        raise KforgeError("--workload-accept needs --workload NAME", hint="name the workload that decides")
    # Before the run: a typo costs nothing.
    workload = find_workload(spec, request.workload_name) if request.workload_name else None
    _refuse_unwritable(spec.kernel_path if request.write_in_place else request.out_path, request.write_in_place,
                       resume_dir or report_dir)
    _refuse_unparsable(spec)
    return spec, workload, _recorded_start(resume_dir) if resume_dir is not None else {}


def _config(request: OptimizeRequest, spec: KernelSpec, kind: str, recorded: dict[str, Any]) -> RunConfig:
    """The run's config: the policy's budgets and evaluation settings with the flags over them, the endpoint
    checked."""
    base_url, api_key, models = request.base_url, request.api_key, request.models
    endpoint = endpoint_from_env(base_url=base_url, api_key=api_key, model=models[0] if models else None,
                                 max_tokens=request.max_tokens) if configured(base_url=base_url, api_key=api_key) \
        else None
    # A wrong address, key or model: one line in seconds, before any evaluation (a resumed tuner run is refused
    # for the endpoint itself, by OptimizeRun.open).
    if endpoint is not None and recorded.get("mode") in (None, LLM):
        endpoint = LLMClient(endpoint, timeout=endpoint.timeout_s).check()
    # Without --policy: the default policy's budgets and a quick look per candidate. The same evaluation flags
    # as `check`, over the policy's.
    config = RunConfig.from_policy(load_policy(request.policy_path), spec, kind, command="optimize",
                                   quick=request.policy_path is None, endpoint=endpoint, models=models,
                                   iterations=request.iterations, tokens=request.budget_tokens,
                                   time_limit_s=request.time_limit, patience=request.patience, seeds=request.seeds,
                                   timeout_s=request.timeout, allow_framework_fallback=request.allow_fallback or None)
    click.echo(announcement(config.settings.isolation), err=True)
    config.parallel, config.beam, config.workers = request.parallel, request.beam, request.workers
    config.counters = request.counters
    if request.baselines:
        config.baselines = tuple(dict.fromkeys(("eager", *request.baselines)))
    config.executor, config.ray_address = request.executor, request.ray_address
    if not request.no_cache:
        config.cache_dir = request.cache_dir or user_cache_dir()
    if endpoint is not None:
        config.references = sibling_references(spec, request.file, kind)
    config.cpu_count = default_cpu_count()
    return config


def _run(request: OptimizeRequest, spec: KernelSpec, kind: str, config: RunConfig, folder: Path,
         console: Console) -> tuple[OptimizeRun, OptimizeOutcome]:
    """The run opened (or resumed) in `folder` and driven to its end under the live display."""
    display = Display(console, config.budgets, TUNER if config.endpoint is None else LLM)
    _announce(console, f"{spec.name} ({spec.kernel_file}) on {kind}"
              + (f", resuming {folder}" if request.resume_dir else ""), config, folder)
    run = OptimizeRun.open(spec, config, folder, resume=request.resume_dir is not None,
                           progress=display.on_progress)
    run.trajectory.listeners.append(display.on_event)
    display.attach(run.trajectory.record)
    _announce_run(console, run)
    try:
        with display:
            return run, run.run()
    except KeyboardInterrupt:
        files = run.finish(note="interrupted")
        console.print(f"interrupted: the run so far is in {folder} (report: {files.markdown}); continue it with "
                      f"--resume {folder}", markup=False)
        raise


def _end_to_end(request: OptimizeRequest, spec: KernelSpec, workload: WorkloadSpec | None, outcome: OptimizeOutcome,
                kind: str, console: Console) -> WorkloadReport | None:
    """The best candidate against the kernel as written in the workload (--workload), when there is one."""
    if workload is None or not outcome.improved or outcome.best_source is None:
        return None
    console.print(f"workload {workload.name}: the best candidate against the kernel as written, end to end",
                  markup=False)
    end_to_end = candidate_end_to_end(spec, workload, outcome.best_source, kind, load_policy(request.policy_path))
    console.print(f"workload {workload.name}: {end_to_end.verdict}: {end_to_end.reason}", markup=False)
    return end_to_end


def _print_how_to_continue(console: Console, request: OptimizeRequest, outcome: OptimizeOutcome,
                           folder: Path) -> None:
    """The command that resumes a run that stopped on its budget or on the endpoint."""
    again = f"kforge-bot optimize {request.file} " + (f"--kernel {request.kernel} " if request.kernel else "") + \
        f"--resume {folder}"
    if outcome.stop_kind == "BudgetExhausted":
        console.print(f"to continue with a larger budget: {again} --iterations N", markup=False)
    elif outcome.stop_kind in ("LLMUnavailable", "ContextLengthExceeded"):
        # Nothing is lost: every candidate and reply so far is in the trajectory, and a resume asks again.
        console.print(f"the run so far is kept in {folder}; once the endpoint answers again, continue it: {again}",
                      markup=False)


def _announce(console: Console, what: str, config: RunConfig, folder: Path) -> None:
    """Before the run: what is optimized, by which generator, where its report and cache go."""
    console.print("[bold]kforge-bot optimize[/bold]: " + escape(what))
    if config.endpoint is None:
        console.print("generator: [bold]built-in tuner[/bold] (no LLM endpoint configured: set OPENAI_BASE_URL "
                      "or OPENAI_API_KEY to use a model); it searches the kernel's own parameters")
    else:
        console.print(f"generator: LLM generator and analyst, {config.endpoint.describe()}", markup=False)
    console.print(f"report folder: {folder}", markup=False)
    if config.cache_dir is not None:
        console.print(f"result cache: {config.cache_dir}", markup=False)


def _announce_run(console: Console, run: OptimizeRun) -> None:
    """Once the run is open: its evaluation pool, and the parameters the tuner will search."""
    pool, config = run.evaluator.pool, run.config
    if pool is not None:
        console.print(f"evaluation pool ({pool.executor}): {pool.describe()}; {config.parallel} candidate(s) per "
                      "round" + (f", beam {config.beam}" if config.beam > 1 else ""), markup=False)
    if isinstance(run.loop.proposer, TunerProposer):
        tunables = run.loop.proposer.tunables
        shown = ", ".join(f"{t.name} = {t.current_text}" for t in tunables) or "none found"
        console.print("tunable parameters: " + shown, markup=False)


def _write_best(outcome: OptimizeOutcome, destination: Path | None) -> str | None:
    """The best candidate written to --out or over the kernel file (--write); where, or None."""
    if not outcome.improved or outcome.best_source is None or destination is None:
        return None
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(outcome.best_source, encoding="utf-8")
    return str(destination)


def _print_outcome(console: Console, run: OptimizeRun, outcome: OptimizeOutcome, files: ReportFiles,
                   written: str | None, kernel_file: str, to_out: bool) -> None:
    """How the run ended: why it stopped, the best candidate (or that none beat the kernel) and the report."""
    record = outcome.record
    console.print(f"stopped: {outcome.stop_reason}", markup=False)
    if run.evaluator.cache is not None:
        console.print(f"result cache: {run.evaluator.hits} hit(s), {run.evaluator.misses} miss(es)", markup=False)
    if outcome.improved and record.best is not None:
        best = record.best
        ci = f" (95% CI {best.speedup_ci[0]:.3f}-{best.speedup_ci[1]:.3f})" if best.speedup_ci else ""
        console.print(f"[bold green]best: {best.speedup:.3f}x{ci}[/bold green] faster than the kernel as written, "
                      f"correct; iteration {best.iteration}" + escape(f" ({best.change})" if best.change else ""))
        if len(best.per_shape) > 1:
            console.print(DEFINITION, markup=False, soft_wrap=True)
            for line in text_lines(best.per_shape):
                console.print(f"  {line}", markup=False, soft_wrap=True)
        console.print(f"written to {written}" if written else
                      f"not written anywhere (pass --out or --write); the best is in {run.trajectory.root}",
                      markup=False)
    else:
        console.print("[bold]no candidate beat the kernel as written[/bold] with confidence: "
                      + escape(f"{kernel_file} left untouched" + (", nothing written to --out" if to_out else "")))
    console.print(f"report: {files.markdown}" + ("" if files.plot else f" (plot skipped: {files.plot_note})"),
                  markup=False)


def _refuse_unwritable(best_to: Path | None, in_place: bool, report_dir: Path | None) -> None:
    """Where the run will write, checked before its work: an hour of measurements must not end in "cannot write"."""
    if best_to is not None:
        flag = "--write" if in_place else "--out"
        refusal = write_refusal(best_to, f"the best candidate ({flag})",
                                "make the checkout writable, or give --out a path you can write" if in_place
                                else "give --out a path in a folder you can write")
        if refusal is not None:
            raise refusal
    if report_dir is not None:
        refusal = folder_refusal(report_dir, "the run's report", "give --report a folder you can read and write")
        if refusal is not None:
            raise refusal


def _refuse_unparsable(spec: KernelSpec) -> None:
    """A Python kernel that does not parse, said at once with its line (the baseline would only fail after
    workers started)."""
    if spec.kernel_path.suffix == ".py":
        parse_python(spec.kernel_path, kernel_implementation(spec).source)


def _recorded_start(folder: Path) -> dict[str, Any]:
    """The start event of the run in `folder` ({} where there is none: OptimizeRun.open says what is wrong)."""
    path = folder / TRAJECTORY_FILE
    if not path.is_file():
        return {}
    events = read_events(path)
    return events[0] if events and events[0].get("event") == "start" else {}
