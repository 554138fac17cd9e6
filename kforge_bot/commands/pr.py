"""`kforge-bot pr`: the pull-request bot (what the GitHub Action runs).

Reads the Actions environment (GITHUB_EVENT_NAME / _PATH, GITHUB_REPOSITORY, GITHUB_API_URL,
GITHUB_TOKEN, GITHUB_WORKSPACE, GITHUB_STEP_SUMMARY), decides whether the event may run here (a skip
prints the reason, puts it in the summary and exits 0), optimizes the kernels the PR changed on this
runner's target, and publishes follow-up PRs with the evidence (`kforge_bot.prbot.pull_request`).
Exit codes: 0 done or skipped, 2 bad input (event, policy, environment) or a GitHub/git error.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

import click

from kforge_bot import gitops
from kforge_bot.prbot import pull_request, results
from kforge_bot.prbot.optimize_kernel import optimize_kernel
from kforge_bot.github.client import GitHub
from kforge_bot.commands import examples, json_option, json_refusal, timing_budget_option, write_json
from kforge_bot.config.policy import load_policy, load_policy_from_base
from kforge_bot.evaluate.isolation import announcement

_ANNOUNCED: list[str] = []


def _announce_isolation(isolation: str) -> None:
    """Once, just before the first pull-request code runs (not before bad input is reported in one line)."""
    if not _ANNOUNCED:
        _ANNOUNCED.append(announcement(isolation))
        click.echo(_ANNOUNCED[0], err=True)


@click.command("pr", epilog=examples(
    "kforge-bot pr --target h200              # in the Action: the event from $GITHUB_EVENT_PATH",
    "kforge-bot pr --target cpu --no-publish  # the same work, no follow-up PR opened"))
@click.option("--target", "targets", multiple=True,
              help="Runner class (h200, b200, arc-b580, cpu, ...) or device kind this job measures on; "
                   "repeatable. Default: auto.")
@click.option("--model", "models", multiple=True,
              help="Model name at the LLM endpoint (default: KFORGE_MODEL); repeat it to have several models take "
                   "turns, as in optimize. No endpoint: the tuner.")
@click.option("--iterations", type=click.IntRange(1, 100_000), default=None,
              help="Loop iterations per kernel (default: the policy's budgets.iterations).")
@timing_budget_option("Seconds of interleaved timing in each candidate's evaluation (default: the policy's "
                      "evaluation.timing_budget_s).", maximum=3600)
@click.option("--policy", "policy_path", default=None,
              help="Policy file, or a shipped one (default, strict); a file in the checkout is read as the PR's base "
                   "commit has it.")
@json_option("The results: evidence, candidates, follow-up PR numbers (the per-target jobs' files --aggregate reads).")
@click.option("--results", "results_path", type=click.Path(dir_okay=False, path_type=Path), default=None, hidden=True,
              help="Deprecated spelling of --json PATH.")
@click.option("--no-publish", is_flag=True,
              help="Measure and write the results file only: no branch, PR, comment or status.")
@click.option("--aggregate", "aggregate_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Combine the results files of per-target jobs in this directory and publish (no optimizing).")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the loop's trajectories go (default: a temporary directory).")
def pr(targets: tuple[str, ...], models: tuple[str, ...], iterations: int | None, timing_budget: float | None,
       policy_path: str | None, json_path: str | None, results_path: Path | None, no_publish: bool,
       aggregate_dir: Path | None, work_dir: Path | None) -> None:
    """Optimize the kernels a pull request changed and open follow-up PRs with the evidence."""
    if results_path is not None:
        click.echo("kforge-bot pr: note: --results is deprecated; use --json PATH (the same file)", err=True)
        json_path = json_path or str(results_path)
        refusal = json_refusal(json_path)  # before any work, as --json's own check
        if refusal is not None:
            raise refusal
    env = pull_request.ActionEnv.from_env()
    _ANNOUNCED.clear()
    policy_file = policy_path or os.environ.get("KFORGE_POLICY") or None

    def base_policy(event: Any) -> Any:
        """The policy as the PR's base commit has it: the workspace holds the PR head, which must not set its own
        trust, thresholds or isolation."""
        if policy_file is None:
            return load_policy(None)
        repo = Path(env.workspace)
        gitops.ensure_commit(repo, event.base_sha)
        return load_policy_from_base(repo, event.base_sha, policy_file)

    # Token and repository come from the environment; the token never goes to the evaluated code:
    # evaluate() runs candidates in a child whose environment is scrubbed of credentials.
    gh = GitHub.from_env()

    def log(message: str) -> None:
        click.echo(f"kforge pr: {message}", err=True)

    options = pull_request.Options(targets=targets, iterations=iterations, model=models[0] if models else None,
                            models=models if len(models) > 1 else (), publish=not no_publish,
                            timing_budget_s=timing_budget, work_dir=str(work_dir) if work_dir else None)
    report = pull_request.run_pr(env, base_policy, options, gh=gh,
                          optimize=partial(optimize_kernel, announce=_announce_isolation), aggregate_dir=aggregate_dir,
                          log=log)
    write_json(report.to_dict(), json_path)
    results.write_summary(env.step_summary, (f"{_ANNOUNCED[0]}\n\n" if _ANNOUNCED else "")
                          + results.summary_markdown(report))
    if not report.allowed:
        click.echo(f"kforge-bot pr: skipped: {report.decision}")
        return
    for run in report.kernels:
        o = run.evidence
        click.echo(f"{o.kernel}: " + (f"follow-up PR #{o.pr_number} {o.pr_url}" if o.pr_url
                                      else f"no follow-up PR: {o.skip_reason}" if o.skip_reason
                                      else "candidate ready (not published)"))
    for note in report.notes:
        click.echo(f"note: {note}")
    if not report.kernels:
        click.echo("no changed kernels")

