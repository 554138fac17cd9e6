"""`kforge-bot check REFERENCE [--candidate FILE]`: one evaluation, a verdict and a speedup; `--all [REPO]`:
every managed kernel of a repository against its reference, a line each.

Exit codes: 0 correct, 1 rejected (incorrect, cheating, crash, hang, compile error), 2 usage or
configuration error.
"""

from __future__ import annotations

from pathlib import Path

import click

from kforge_bot.check.run import CheckRequest, run_check
from kforge_bot.commands import (
    examples,
    json_option,
    output_console,
    target_option,
    timing_budget_option,
    write_json,
)
from kforge_bot.config.choices import BASELINE_KINDS


@click.command("check", epilog=examples(
    "kforge-bot check examples/kforge.yaml --kernel matmul_bias_relu_cpu    # a manifest kernel vs its reference",
    "kforge-bot check problem.py --candidate problem_new.py --target cuda  # KernelBench: ModelNew vs Model",
    "kforge-bot check problem.py --candidate problem_new.py --json -       # the full report as JSON on stdout",
    "kforge-bot check --all examples --target cpu                          # every kernel a repository manages"))
@click.argument("reference", type=click.Path(path_type=Path), required=False)
@click.option("--all", "all_kernels", is_flag=True,
              help="Check every kernel REFERENCE (a repository folder, default .) manages, as `list` shows them.")
@click.option("--policy", "policy_path", default=None,
              help="Policy file or built-in name: its evaluation settings (seeds, timing budget, timeout, worker "
                   "limits), the isolation default and, with --all, which paths hold kernels. Without one: the default "
                   "policy with a quick look (the kernel's own seeds, 3 s of timing).")
@click.option("--candidate", "candidate_path", type=click.Path(path_type=Path), default=None,
              help="Candidate file (KernelBench: defines ModelNew; manifest kernel: defines the entry).")
@click.option("--kernel", default=None, help="Kernel name, when REFERENCE is a kforge.yaml with several.")
@target_option("Where to run.")
@json_option("The full report.")
@click.option("--seeds", type=click.IntRange(1, 100), default=None,
              help="Correctness seeds per shape set (default: the policy's evaluation.seeds; without --policy, the "
                   "kernel's own).")
@timing_budget_option("Seconds of interleaved timing in this evaluation, at most (default: the policy's "
                      "evaluation.timing_budget_s; without --policy, 3).", maximum=600)
@click.option("--timeout", type=click.FloatRange(1, 7200), default=None,
              help="Seconds before the candidate's process is killed, compilation included (default: the policy's "
                   "evaluation.timeout_s, 300).")
@click.option("--no-timing", is_flag=True, help="Check correctness only.")
@click.option("--allow-fallback", is_flag=True, help="Accept candidates that call the framework op they replace.")
@click.option("--isolation", type=click.Choice(["required", "preferred", "off"]), default=None,
              help="The OS sandbox for the kernel's code: refuse to run without it, use it where the machine "
                   "has it, or never (default: the policy's, preferred in the default policy).")
@click.option("--baseline", "baselines", multiple=True, type=click.Choice(BASELINE_KINDS),
              help="Also time the baseline under torch.compile (compile; compile-max-autotune) and report the "
                   "speedup against it and against the faster of eager and it (default: the policy's baseline).")
def check(reference: Path | None, all_kernels: bool, policy_path: str | None, candidate_path: Path | None,
          kernel: str | None, target: str, json_path: str | None, seeds: int | None, timing_budget: float | None,
          timeout: float | None, no_timing: bool, allow_fallback: bool, isolation: str | None,
          baselines: tuple[str, ...]) -> int:
    """Evaluate a kernel against its reference: correctness, then speed (interleaved, with a 95% CI)."""
    request = CheckRequest(reference=reference, all_kernels=all_kernels, policy_path=policy_path,
                           candidate_path=candidate_path, kernel=kernel, target=target, seeds=seeds,
                           timing_budget_s=timing_budget, timeout_s=timeout, measure=not no_timing,
                           allow_fallback=allow_fallback, isolation=isolation, baselines=baselines)
    return run_check(request, quiet=json_path is not None and str(json_path) == "-", console=output_console(),
                     save_json=lambda data: write_json(data, json_path))
