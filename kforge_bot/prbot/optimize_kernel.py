"""One kernel of a pull request through the optimize loop, for the PR bot (`pull_request.run_pr`'s `optimize`)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kforge_bot.agents.llm import configured, endpoint_from_env
from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.optimize.counters import section, tool_title
from kforge_bot.optimize.run import OptimizeRun, RunConfig


def optimize_kernel(spec: Any, kind: str, policy: Any, *, announce: Callable[[str], None],
                    iterations: int | None = None, model: str | None = None, models: Sequence[str] = (),
                    timing_budget_s: float | None = None, work_dir: str | None = None,
                    log: Any = None) -> tuple[str | None, Any, dict[str, Any]]:
    """The ONLY place the PR bot touches the optimize loop (kforge_bot.optimize.run).

    Runs the LLM loop when an endpoint is configured (OPENAI_BASE_URL / OPENAI_API_KEY), else the
    built-in tuner, on one spec and device kind, within the policy's budgets. Returns (the best
    accepted candidate's source, its EvalResult, how it was found), or (None, None, how) when no
    candidate beat the kernel as written."""
    endpoint = endpoint_from_env(model=model) if configured() else None
    announce(policy.isolation_mode("pr"))  # just before the first pull-request code runs
    config = RunConfig.from_policy(policy, spec, kind, command="pr", endpoint=endpoint, models=models,
                                   iterations=iterations, timing_budget_s=timing_budget_s)
    root = Path(work_dir or tempfile.mkdtemp(prefix="kforge-pr-"))
    root.mkdir(parents=True, exist_ok=True)
    # A fresh folder per run: a self-hosted runner keeps --work-dir between runs, and the loop
    # refuses a report folder that already holds a run.
    report_dir = Path(tempfile.mkdtemp(prefix=f"{spec.name}-{kind}-", dir=root))
    if log:
        log(f"{spec.name}: {'LLM ' + endpoint.describe() if endpoint else 'no LLM endpoint configured: built-in tuner'}"
            f", {config.budgets.iterations} iteration(s)")
    run = OptimizeRun.open(spec, config, report_dir)
    outcome = run.run()
    run.finish()  # report.md beside the trajectory: the job's reports artifact holds what a reviewer reads
    how = outcome.how_found()
    how["trajectory"] = str(report_dir)
    record = outcome.record
    before, after = record.position("baseline") or {}, record.position("best") or {}
    if before.get("roofline_fraction") is not None or after.get("roofline_fraction") is not None:
        how["roofline"] = {"before": before.get("roofline_fraction"), "after": after.get("roofline_fraction"),
                           "bound": after.get("bound") or before.get("bound")}
    if record.counters or record.counters_note:  # the follow-up PR's before/after table (kforge_bot.optimize.counters)
        best = record.counters.get(record.best.iteration) if record.best else None
        how["counters"] = section(record.counters.get(0), best, record.counters_note)
        how["counters_tool"] = tool_title(record.counters.get(0), best)
    if record.best is None or outcome.best_source is None:
        return None, None, how
    return outcome.best_source, EvalResult.from_dict(record.best.result), how
