"""`kforge-bot gate --base REF`: the performance and correctness regression gate for CI.

Exit codes: 0 nothing regressed or broke, 1 a kernel regressed, became incorrect or errors (or, with
`--require-all-targets` / the policy's `gate.require_all_targets`, a required target could not be
measured on this runner), 2 usage or configuration error. Without that flag a required target this
runner lacks is reported as `skipped (needs cuda)` and does not fail the run. The decision rule is
documented in `kforge_bot/gate/__init__.py`.
"""

from __future__ import annotations

from pathlib import Path

import click

from kforge_bot.commands import examples, json_option, output_console, timing_budget_option, write_json
from kforge_bot.gate.publish import GateRequest, run_and_publish


@click.command("gate", epilog=examples(
    "kforge-bot gate --base origin/main --head HEAD      # the kernels a change touches, base against head",
    "kforge-bot gate --base v1.2 --head HEAD --all      # every managed kernel",
    "kforge-bot gate --base origin/main --head HEAD --json gate.json   # the verdicts, machine-readable"))
@click.option("--base", "base", required=True, help="Base revision (the PR's target branch or its sha).")
@click.option("--head", "head", default="HEAD", show_default=True, help="Head revision (the PR's head).")
@click.option("--all", "all_kernels", is_flag=True, help="Measure every managed kernel, changed or not (nightly).")
@click.option("--target", default="auto", show_default=True,
              help="auto, a device kind (cpu, cuda, xpu, mps) or a runner class (h200, b200, arc-b580, ...).")
@click.option("--policy", "policy_path", default=None,
              help="Policy file (or a shipped one: default, strict), read as the base revision has it when it is in "
                   "the repository. Default: the shipped default policy.")
@json_option("The full report.")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="Result cache directory (default: $KFORGE_CACHE_DIR, else ~/.cache/kforge-bot, which fits "
                   "actions/cache); one inside the checkout is not used.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@timing_budget_option("Seconds of interleaved timing in each kernel's evaluation (default: the policy's "
                      "evaluation.timing_budget_s).", maximum=3600)
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="A directory inside the git repository.")
@click.option("--require-all-targets", is_flag=True, default=None,
              help="Fail when a policy-required target cannot be measured on this runner (default: the policy's "
                   "gate.require_all_targets; otherwise it is reported as skipped).")
def gate(base: str, head: str, all_kernels: bool, target: str, policy_path: str | None, json_path: str | None,
         cache_dir: Path | None, no_cache: bool, timing_budget: float | None, repo: Path,
         require_all_targets: bool | None) -> int:
    """Measure the kernels a change touches, base against head on this device, and fail on a
    regression, an incorrect kernel or one that no longer builds."""
    request = GateRequest(repo=repo, base=base, head=head, all_kernels=all_kernels, target=target,
                          policy_path=policy_path, cache_dir=cache_dir, use_cache=not no_cache,
                          timing_budget_s=timing_budget, require_all_targets=require_all_targets)
    return run_and_publish(request, quiet=json_path is not None and str(json_path) == "-", console=output_console(),
                           progress=output_console(stderr=True), save_json=lambda data: write_json(data, json_path))
