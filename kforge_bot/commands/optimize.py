"""`kforge-bot optimize FILE`: the generator/analyst loop on one kernel, or the built-in tuner without a model.

Exit codes: 0 the run finished (the best candidate written to --out or in place with --write when one beat
the kernel as written; otherwise nothing is written and the report says so); 1 the LLM endpoint failed during
the run before any iteration ran; 2 usage or configuration error (a wrong endpoint address, API key or model name
included: checked before any evaluation).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from kforge_bot.agents.llm import LLMClient, configured, endpoint_from_env
from kforge_bot.commands import (
    examples,
    folder_refusal,
    json_option,
    output_console,
    target_option,
    write_json,
    write_refusal,
)
from kforge_bot.config.choices import BASELINE_KINDS
from kforge_bot.config.policy import load_policy
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.isolation import announcement
from kforge_bot.evaluate.shapes import DEFINITION, text_lines
from kforge_bot.gate.decision import FAILING
from kforge_bot.machine.cache_dirs import user_cache_dir
from kforge_bot.optimize.display import Display
from kforge_bot.optimize.protocols import LLM, TUNER
from kforge_bot.optimize.report import ReportFiles
from kforge_bot.optimize.run import OptimizeOutcome, OptimizeRun, RunConfig, default_cpu_count
from kforge_bot.optimize.trajectory import TRAJECTORY_FILE, read_events
from kforge_bot.optimize.tuner_proposer import TunerProposer
from kforge_bot.spec import kernel_implementation, load_spec, parse_python
from kforge_bot.spec.kernels import sibling_references
from kforge_bot.targets import choose_target
from kforge_bot.workloads.candidate import candidate_end_to_end, find_workload


@click.command("optimize", epilog=examples(
    "kforge-bot optimize examples/kforge.yaml --kernel matmul_bias_relu_cpu --iterations 8 --report out",
    "kforge-bot optimize kernel.py --target cuda --model gpt-4.1 --write   # the LLM loop, then update the file",
    "kforge-bot optimize problem.py --resume out                           # carry on an interrupted run"))
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--kernel", default=None, help="Kernel name, when FILE is a kforge.yaml with several.")
@target_option("What to optimize for.")
@click.option("--model", "models", multiple=True,
              help="Model name (default: $KFORGE_MODEL, or the endpoint's only model); repeat it to have several "
                   "models take turns writing each round's candidates.")
@click.option("--iterations", type=click.IntRange(1, 100_000), default=None,
              help="Candidates to evaluate, at most, over the whole run (a resumed run counts its earlier ones; "
                   "default: the policy's budgets.iterations, 10).")
@click.option("--budget-tokens", type=click.IntRange(1), default=None,
              help="LLM tokens to spend over the whole run, at most (default: the policy's budgets.tokens).")
@click.option("--time-limit", type=click.FloatRange(1, None), default=None,
              help="Seconds of wall time over the whole run, at most; checked between candidates (default: the "
                   "policy's budgets.time_limit_s).")
@click.option("--patience", type=click.IntRange(1, 100_000), default=None,
              help="Stop after this many candidates in a row without a new best (default: the policy's "
                   "budgets.patience, else 6 for the tuner and 4 for an LLM).")
@click.option("--out", "out_path", type=click.Path(path_type=Path), default=None,
              help="Write the best candidate here.")
@click.option("--write", "write_in_place", is_flag=True, help="Write the best candidate over FILE's kernel file.")
@click.option("--report", "report_dir", type=click.Path(path_type=Path), default=None,
              help="Folder for the trajectory, candidates, report.md and plot.png (default: a new temporary folder).")
@click.option("--resume", "resume_dir", type=click.Path(path_type=Path), default=None,
              help="Continue the run recorded in this report folder.")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL).")
@click.option("--api-key", default=None, help="API key (default: $OPENAI_API_KEY; prefer the variable: "
                                              "command lines are visible to other users).")
@click.option("--policy", "policy_path", default=None,
              help="Policy file (or a shipped name, e.g. strict) for budgets and evaluation settings; without "
                   "one: the default policy's budgets and a quick evaluation (2 seeds, 2 s of timing per candidate).")
@click.option("--parallel", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Candidates per round, evaluated at once on a pool of evaluation slots (one per GPU).")
@click.option("--beam", type=click.IntRange(1, 64), default=1, show_default=True,
              help="The best K correct candidates carried forward as the next round's starting points.")
@click.option("--workers", type=click.IntRange(1, 1024), default=None,
              help="Evaluation slots (default: every GPU of the target; 1 on the CPU, where timing runs on shared "
                   "cores disturb each other).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where evaluations run: this host's devices, or a Ray cluster.")
@click.option("--ray-address", default=None, help="Ray cluster to join (default: $RAY_ADDRESS, else a local one).")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="Result cache folder (default: $KFORGE_CACHE_DIR or ~/.cache/kforge-bot); results are reused "
                   "only for the same content on the same hardware.")
@click.option("--no-cache", is_flag=True, help="Measure every candidate, even one measured before.")
@click.option("--seeds", type=click.IntRange(1, 100), default=None,
              help="Correctness seeds per shape set for every candidate (default: the policy's, or 2).")
@click.option("--timeout", type=click.FloatRange(1, 7200), default=None,
              help="Seconds before a candidate's process is killed, compilation included (default: the policy's).")
@click.option("--allow-fallback", is_flag=True, help="Accept candidates that call the framework op they replace.")
@click.option("--max-tokens", type=click.IntRange(1), default=None,
              help="The most tokens one model reply may have, sent with every request (default: $KFORGE_MAX_TOKENS, "
                   "else 4096; the analyst asks for at most 1024).")
@click.option("--counters", type=click.Choice(["auto", "off", "full"]), default="auto", show_default=True,
              help="Hardware counters (Nsight Compute) of the kernel as written and each accepted candidate, on "
                   "CUDA targets: auto (where ncu is found), off, full (also keep the .ncu-rep files).")
@click.option("--baseline", "baselines", multiple=True, type=click.Choice(BASELINE_KINDS),
              help="Also time the kernel as written under torch.compile (compile; compile-max-autotune): a candidate "
                   "is accepted only if faster than the faster of eager and it (default: the policy's baseline).")
@click.option("--workload", "workload_name", default=None,
              help="A workload of the kernel's kforge.yaml: report the best candidate's end-to-end change on it.")
@click.option("--workload-accept", is_flag=True,
              help="With --workload: write the best candidate only when the workload is not slower (the gate's "
                   "rule at gate.workloads.threshold) and its output matches.")
@json_option("The run's outcome: the best candidate, its speedup and interval, why the run stopped, the report.")
def optimize(file: Path, kernel: str | None, target: str, models: tuple[str, ...], iterations: int | None,
             budget_tokens: int | None, time_limit: float | None, patience: int | None, out_path: Path | None, write_in_place: bool,
             report_dir: Path | None, resume_dir: Path | None, base_url: str | None, api_key: str | None,
             policy_path: str | None, parallel: int, beam: int, workers: int | None, executor: str,
             ray_address: str | None, cache_dir: Path | None, no_cache: bool, seeds: int | None,
             timeout: float | None, allow_fallback: bool, max_tokens: int | None, counters: str,
             baselines: tuple[str, ...], workload_name: str | None, workload_accept: bool,
             json_path: str | None) -> int:
    """Optimize one kernel: an LLM generator and analyst when an endpoint is configured
    (OPENAI_BASE_URL / OPENAI_API_KEY), else the built-in tuner. Every candidate is checked and timed
    against the kernel as written; the best one that is faster with confidence is kept."""
    if out_path is not None and write_in_place:
        raise KforgeError("--out and --write exclude each other", hint="choose where the best candidate goes")
    if resume_dir is not None and report_dir is not None and resume_dir.resolve() != report_dir.resolve():
        raise KforgeError("--resume continues the run in its own folder; drop --report or give the same folder")
    spec = load_spec(file, kernel)
    if write_in_place and spec.format == "kernelbench":
        raise KforgeError("--write would replace the problem's reference Model with a candidate", path=spec.kernel_path,
                          hint="for a KernelBench problem, write the candidate (ModelNew) with --out")
    if workload_accept and workload_name is None:
        raise KforgeError("--workload-accept needs --workload NAME", hint="name the workload that decides")
    workload = find_workload(spec, workload_name) if workload_name else None  # before the run: a typo costs nothing
    _refuse_unwritable(spec.kernel_path if write_in_place else out_path, write_in_place, resume_dir or report_dir)
    _refuse_unparsable(spec)
    recorded = _recorded_start(resume_dir) if resume_dir is not None else {}
    recorded_target = recorded.get("target")
    # A resumed run stays on the device it started on, unless another is named.
    kind = choose_target(recorded_target if target == "auto" and recorded_target else target).device_kind(spec.targets)
    endpoint = endpoint_from_env(base_url=base_url, api_key=api_key, model=models[0] if models else None,
                                 max_tokens=max_tokens) if configured(base_url=base_url, api_key=api_key) else None
    # A wrong address, key or model: one line in seconds, before any evaluation (a resumed tuner run is refused
    # for the endpoint itself, by OptimizeRun.open).
    if endpoint is not None and recorded.get("mode") in (None, LLM):
        endpoint = LLMClient(endpoint, timeout=endpoint.timeout_s).check()
    # Without --policy: the default policy's budgets and a quick look per candidate. The same evaluation flags
    # as `check`, over the policy's.
    config = RunConfig.from_policy(load_policy(policy_path), spec, kind, command="optimize",
                                   quick=policy_path is None, endpoint=endpoint, models=models, iterations=iterations,
                                   tokens=budget_tokens, time_limit_s=time_limit, patience=patience, seeds=seeds,
                                   timeout_s=timeout, allow_framework_fallback=allow_fallback or None)
    click.echo(announcement(config.settings.isolation), err=True)
    config.parallel, config.beam, config.workers = parallel, beam, workers
    config.counters = counters
    config.baselines = tuple(dict.fromkeys(("eager", *baselines))) if baselines else config.baselines
    config.executor, config.ray_address = executor, ray_address
    if not no_cache:
        config.cache_dir = cache_dir or user_cache_dir()
    if endpoint is not None:
        config.references = sibling_references(spec, file, kind)
    config.cpu_count = default_cpu_count()

    console = output_console(stderr=json_path == "-")  # stdout carries the JSON then
    folder = resume_dir or report_dir or Path(tempfile.mkdtemp(prefix=f"kforge-optimize-{spec.name}-"))
    display = Display(console, config.budgets, TUNER if config.endpoint is None else LLM)
    _announce(console, f"{spec.name} ({spec.kernel_file}) on {kind}"
              + (f", resuming {folder}" if resume_dir else ""), config, folder)
    run = OptimizeRun.open(spec, config, folder, resume=resume_dir is not None, progress=display.on_progress)
    run.trajectory.listeners.append(display.on_event)
    display.attach(run.trajectory.record)
    _announce_run(console, run)
    try:
        with display:
            outcome = run.run()
    except KeyboardInterrupt:
        files = run.finish(note="interrupted")
        console.print(f"interrupted: the run so far is in {folder} (report: {files.markdown}); continue it with "
                      f"--resume {folder}", markup=False)
        raise

    end_to_end = None
    if workload is not None and outcome.improved and outcome.best_source is not None:
        console.print(f"workload {workload.name}: the best candidate against the kernel as written, end to end",
                      markup=False)
        end_to_end = candidate_end_to_end(spec, workload, outcome.best_source, kind, load_policy(policy_path))
        console.print(f"workload {workload.name}: {end_to_end.verdict}: {end_to_end.reason}", markup=False)
    refused = workload_accept and end_to_end is not None and end_to_end.verdict in FAILING
    written = None if refused else _write_best(outcome, spec.kernel_path if write_in_place else out_path)
    note = None if outcome.improved else "no candidate beat the kernel as written; the original was left untouched"
    if refused:
        note = f"the best candidate was not written: workload {workload_name} is {end_to_end.verdict} end to end"
    files = run.finish(written_to=written, note=note)
    _print_outcome(console, run, outcome, files, written, spec.kernel_file, out_path is not None)
    again = f"kforge-bot optimize {file} " + (f"--kernel {kernel} " if kernel else "") + f"--resume {folder}"
    if outcome.stop_kind == "BudgetExhausted":
        console.print(f"to continue with a larger budget: {again} --iterations N", markup=False)
    elif outcome.stop_kind in ("LLMUnavailable", "ContextLengthExceeded"):
        # Nothing is lost: every candidate and reply so far is in the trajectory, and a resume asks again.
        console.print(f"the run so far is kept in {folder}; once the endpoint answers again, continue it: {again}",
                      markup=False)
    record = outcome.record
    best = record.best if outcome.improved else None
    write_json({"kernel": spec.name, "target": kind, "mode": run.proposer_kind, "improved": outcome.improved,
                "best": None if best is None else {"iteration": best.iteration, "speedup": best.speedup,
                                                   "speedup_ci": best.speedup_ci, "change": best.change,
                                                   "per_shape": [p.to_dict() for p in best.per_shape]},
                "written_to": written, "workload": None if end_to_end is None else end_to_end.to_dict(),
                "iterations": record.iterations_used, "stop": outcome.stop_kind,
                "stop_reason": outcome.stop_reason, "report_dir": str(folder), "report": str(files.markdown)},
               json_path)
    return 1 if outcome.stop_kind in ("LLMUnavailable", "ContextLengthExceeded") and record.iterations_used == 0 else 0


def _announce(console: Any, what: str, config: RunConfig, folder: Path) -> None:
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


def _announce_run(console: Any, run: OptimizeRun) -> None:
    """Once the run is open: its evaluation pool, and the parameters the tuner will search."""
    pool, config = run.evaluator.pool, run.config
    if pool is not None:
        console.print(f"evaluation pool ({pool.executor}): {pool.describe()}; {config.parallel} candidate(s) per "
                      "round" + (f", beam {config.beam}" if config.beam > 1 else ""), markup=False)
    if isinstance(run.loop.proposer, TunerProposer):
        tunables = run.loop.proposer.tunables
        console.print("tunable parameters: " + (", ".join(f"{t.name} = {t.current_text}" for t in tunables) or "none found"),
                      markup=False)


def _write_best(outcome: OptimizeOutcome, destination: Path | None) -> str | None:
    """The best candidate written to --out or over the kernel file (--write); where, or None."""
    if not outcome.improved or outcome.best_source is None or destination is None:
        return None
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(outcome.best_source, encoding="utf-8")
    return str(destination)


def _print_outcome(console: Any, run: OptimizeRun, outcome: OptimizeOutcome, files: ReportFiles, written: str | None,
                   kernel_file: str, to_out: bool) -> None:
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


def _refuse_unparsable(spec: Any) -> None:
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
