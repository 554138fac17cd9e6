"""`kforge-bot bisect --good REV --bad REV [--kernel NAME ...]`: the first commit where a kernel regressed past the
policy's threshold (kforge_bot/history/bisect.py). Exit 0 when every kernel's search ended (found, or no regression
between the two), 1 when one could not be resolved."""

from __future__ import annotations

from pathlib import Path

import click

from kforge_bot import gitops
from kforge_bot.commands import examples, json_option, output_console, target_option, timing_budget_option, write_json
from kforge_bot.config.policy import load_policy_from_base
from kforge_bot.errors import KforgeError
from kforge_bot.gate.run import repo_root
from kforge_bot.history.bisect import BisectResult, bisect as run_bisect, gate_probe
from kforge_bot.kernelspec.kernels import discover


def render(result: BisectResult) -> list[str]:
    lines = [f"{result.kernel}: {result.commits} commit(s) between {result.good[:10]} (good) and {result.bad[:10]} "
             f"(bad), {result.measurements} measured"]
    for step in result.steps:
        lines.append(f"  {step.commit[:10]} {step.verdict}: {step.change} - {step.subject}")
    if result.status == "found":
        lines.append(f"first bad commit: {result.first_bad} {result.subject}")
        lines.append(f"  change against the good revision: {result.change}")
    elif result.status == "not-regressed":
        lines.append(f"the bad revision is not a regression against the good one: {result.steps[0].change}")
    elif result.candidates:
        lines.append("the first bad commit is one of these (the others could not be judged): "
                     + ", ".join(c[:10] for c in result.candidates))
    else:
        lines.append("unresolved: the bad revision could not be judged")
    for step in result.skipped:
        lines.append(f"  not judged: {step.commit[:10]} {step.verdict}: {step.reason}")
    return lines


@click.command("bisect", epilog=examples(
    "kforge-bot bisect --good v1.2 --bad main --kernel softmax",
    "kforge-bot bisect --good HEAD~30 --bad HEAD --json bisect.json"))
@click.option("--good", required=True, help="A revision where the kernel was fast enough.")
@click.option("--bad", required=True, help="A later revision where it is slower (its descendant).")
@click.option("--kernel", "kernels", multiple=True,
              help="A kernel (id or name; repeatable). Default: every managed kernel at the bad revision.")
@target_option("Where to measure: auto, a device kind or a runner class.")
@click.option("--policy", "policy_path", default=None,
              help="Policy file (or a shipped one), read as the good revision has it. Default: the shipped default.")
@timing_budget_option("Seconds of interleaved timing in each step's evaluation (default: the policy's).", maximum=3600)
@json_option("The searches, step by step.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="A directory inside the git repository.")
def bisect(good: str, bad: str, kernels: tuple[str, ...], target: str, policy_path: str | None,
           timing_budget: float | None, json_path: str | None, repo: Path) -> int:
    """Find the first commit between GOOD and BAD where a kernel's time regressed past the policy's threshold,
    measuring commits interleaved against GOOD (about log2(commits) steps)."""
    root = repo_root(repo)
    good_sha = gitops.resolve(root, good)
    policy = load_policy_from_base(root, good_sha, policy_path)
    names = list(kernels) or _all_kernels(root, bad, policy)
    console = output_console()
    results = []
    for name in names:
        probe = gate_probe(root, good_sha, name, policy, target=target, timing_budget_s=timing_budget)
        result = run_bisect(root, good_sha, bad, name, probe)
        results.append(result)
        if json_path != "-":
            for line in render(result):
                console.print(line, markup=False, soft_wrap=True)
    write_json({"results": [r.to_dict() for r in results]}, json_path)
    return 1 if any(r.status == "unresolved" for r in results) else 0


def _all_kernels(root: Path, bad: str, policy) -> list[str]:  # noqa: ANN001 - a Policy
    with gitops.worktree(root, bad) as checkout:
        found = discover(checkout, policy, strict=False, notes=[])
    if not found:
        raise KforgeError(f"no managed kernel at {bad}", hint="add a kforge.yaml, or name the kernel with --kernel")
    return sorted(found)
