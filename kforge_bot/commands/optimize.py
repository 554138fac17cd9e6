"""`kforge-bot optimize FILE`: the generator/analyst loop on one kernel, or the built-in tuner without a model.

Exit codes: 0 the run finished (the best candidate written to --out or in place with --write when one beat
the kernel as written; otherwise nothing is written and the report says so); 1 the LLM endpoint failed during
the run before any iteration ran; 2 usage or configuration error (a wrong endpoint address, API key or model name
included: checked before any evaluation).
"""

from __future__ import annotations

from pathlib import Path

import click

from kforge_bot.commands import examples, json_option, output_console, target_option, write_json
from kforge_bot.config.choices import BASELINE_KINDS
from kforge_bot.optimize.kernel_run import OptimizeRequest, optimize_kernel


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
             budget_tokens: int | None, time_limit: float | None, patience: int | None, out_path: Path | None,
             write_in_place: bool,
             report_dir: Path | None, resume_dir: Path | None, base_url: str | None, api_key: str | None,
             policy_path: str | None, parallel: int, beam: int, workers: int | None, executor: str,
             ray_address: str | None, cache_dir: Path | None, no_cache: bool, seeds: int | None,
             timeout: float | None, allow_fallback: bool, max_tokens: int | None, counters: str,
             baselines: tuple[str, ...], workload_name: str | None, workload_accept: bool,
             json_path: str | None) -> int:
    """Optimize one kernel: an LLM generator and analyst when an endpoint is configured
    (OPENAI_BASE_URL / OPENAI_API_KEY), else the built-in tuner. Every candidate is checked and timed
    against the kernel as written; the best one that is faster with confidence is kept."""
    request = OptimizeRequest(
        file=file, kernel=kernel, target=target, models=models, iterations=iterations, budget_tokens=budget_tokens,
        time_limit=time_limit, patience=patience, out_path=out_path, write_in_place=write_in_place,
        report_dir=report_dir, resume_dir=resume_dir, base_url=base_url, api_key=api_key, policy_path=policy_path,
        parallel=parallel, beam=beam, workers=workers, executor=executor, ray_address=ray_address,
        cache_dir=cache_dir, no_cache=no_cache, seeds=seeds, timeout=timeout, allow_fallback=allow_fallback,
        max_tokens=max_tokens, counters=counters, baselines=baselines, workload_name=workload_name,
        workload_accept=workload_accept)
    console = output_console(stderr=json_path == "-")  # stdout carries the JSON then
    return optimize_kernel(request, console, save_json=lambda data: write_json(data, json_path))
