"""The pull-request bot's orchestration: event -> trust -> changed kernels -> optimize -> publish.

The decisions are pure functions of plain data (`qualifies` and `outcome_for` in outcomes.py,
`aggregate` in results.py); the driver `run_pr` wires them to git (gitops), GitHub (github) and the
optimizer, which the caller passes in (`OptimizeFn`), so that this module never imports the loop and
tests can see each step. Untrusted code runs only inside `evaluate`'s sandbox (a child process with
an environment scrubbed of tokens); this process only reads, diffs and pushes text.

Publishing, per kernel with an improvement (correct, and the lower end of the speedup interval at
least the policy's `min_speedup`): push `kforge/pr-<N>/<kernel>` (PR head + one bot commit), open
or update the one follow-up PR against the PR's head branch; then once per PR: the comment (found
again by its marker), a commit status on the PR head and the job summary.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot import gitops
from kforge_bot.prbot import evidence
from kforge_bot.prbot.outcomes import KernelOutcome, outcome_for, skipped, with_spec_note, with_workloads, workload_row
from kforge_bot.prbot.results import PrReport, aggregate, load_results_dir
from kforge_bot.errors import KforgeError
from kforge_bot.gate.base_spec import judged_spec, spec_changes
from kforge_bot.gate.plan import material
from kforge_bot.github import events, trust
from kforge_bot.github.actions import Actions
from kforge_bot.hardware import get_runner
from kforge_bot.kernelspec import kernel_implementation, kernels
from kforge_bot.targets import TargetChoice, choose_target
from kforge_bot.workloads.candidate import follow_up_workloads

Log = Callable[[str], None]
# (spec, device kind, policy) -> (best candidate source or None, its EvalResult or None, how it was found)
OptimizeFn = Callable[..., "tuple[str | None, Any, dict[str, Any]]"]


# ------------------------------------------------------------------------------ the environment


@dataclass(frozen=True)
class ActionEnv:
    """What GitHub Actions tells the step (the token is kept out of repr)."""

    event_name: str
    event_path: str
    repository: str
    api_url: str
    workspace: str
    step_summary: str | None = None
    server_url: str | None = None
    run_id: str | None = None
    token: str = field(default="", repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ActionEnv:
        actions = Actions.read(env)
        missing = actions.missing("event_name", "event_path", "repository")
        if missing:
            raise KforgeError(f"{', '.join(missing)} not set",
                              hint="run inside GitHub Actions, or set them to an event name, a payload file "
                                   "and owner/name")
        return cls(event_name=actions.event_name, event_path=actions.event_path, repository=actions.repository,
                   api_url=actions.api, workspace=actions.workspace or os.getcwd(),
                   step_summary=actions.step_summary or None, server_url=actions.server_url or None,
                   run_id=actions.run_id or None, token=actions.token)

    @property
    def run_url(self) -> str | None:
        if self.server_url and self.run_id:
            return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"
        return None



# ------------------------------------------------------------------------------ changed kernels


def changed_kernels(repo: str | Path, base_sha: str, head_sha: str, policy: Any, head_root: Path,
                    base_root: Path, notes: list[str], fork_root: Path | None = None
                    ) -> list[tuple[Any, Any, Any]]:
    """The managed kernels (kforge.yaml entries and KernelBench files, as the gate finds them) that the pull request
    changes: (`kernels.Kernel` of the head, of the base branch's tip or None, of the branch point or None).
    `fork_root` is the branch point's checkout where it is not the tip; whether a kernel changed is the pull
    request's own diff (the branch point against the head), as the gate decides it."""
    base_notes: list[str] = []
    base = kernels.discover(base_root, policy, strict=False, notes=base_notes)
    fork = kernels.discover(fork_root, policy, strict=False) if fork_root is not None else base
    try:  # the base's kernels stay managed wherever the head moves their files
        head = kernels.discover(head_root, policy, strict=True, notes=notes, keep=set(base) | set(fork))
    except KforgeError as exc:  # named as a repository path, not the runner's temporary checkout
        raise KforgeError(str(exc).replace(f"{head_root}{os.sep}", "")) from None
    found = []
    for kid in sorted(head):
        kernel = head[kid]
        since, since_root = (fork[kid], fork_root or base_root) if kid in fork else (base.get(kid), base_root)
        if since is not None and material(since, since_root) == material(kernel, head_root):
            continue
        old = base.get(kid)
        if old is None and fork_root is not None:  # removed on the target branch since: the branch point's is the base
            old = fork.get(kid)
        found.append((kernel, old, fork.get(kid) if fork_root is not None else None))
    return found


def judged(kernel: Any, old: Any, policy: Any, labels: Sequence[str], fork: Any = None
           ) -> tuple[Any, str | None, bool]:
    """(the spec the bot optimizes under, what to say about it, whether the PR's own test is waiting for a
    maintainer). The head's code under the base's test (kforge_bot.gate.base_spec: the base branch's tip); under its
    own when it is new, or when a maintainer's label approves the PR's change to its test. What the PR changed of its
    test is what differs from both the tip and the branch point (`fork`): a test main changed since is not the PR's."""
    if old is None or old.spec is None:
        why = "new in this PR" if old is None else "its base version does not load"
        return kernel.spec, f"{why}: judged under its own spec, with no base version to hold it to", False
    changes = spec_changes(old.spec, kernel.spec)
    if fork is not None and fork.spec is not None:
        changes = [part for part in changes if part in spec_changes(fork.spec, kernel.spec)]
    if not changes:
        return judged_spec(kernel.spec, old.spec), None, False
    label, parts = policy.trust.spec_change_label, ", ".join(changes)
    if label in labels:
        return kernel.spec, f"the PR edits this kernel's {parts}; judged under the PR's spec, approved with the " \
                            f"'{label}' label (the base's spec was not measured)", False
    return judged_spec(kernel.spec, old.spec), (f"spec-changed: the PR edits this kernel's {parts}; judged under the "
                                                f"base's spec, and no follow-up PR until a maintainer adds the "
                                                f"'{label}' label"), True


# ------------------------------------------------------------------------------ the driver


@dataclass
class Options:
    targets: Sequence[str] = ()  # runner names or device kinds; empty: auto
    iterations: int | None = None
    model: str | None = None  # the first of `models`, kept for callers that name one
    publish: bool = True
    timing_budget_s: float | None = None
    work_dir: str | None = None  # where trajectories go (default: a temp dir)
    models: Sequence[str] = ()  # several models take turns writing candidates, as in `optimize --model a --model b`


def _label_run(event: events.PullRequestEvent, policy: Any, author_permission: str | None) -> bool:
    """Whether this run was let in by the trigger label (so the label comes off afterwards)."""
    trusted = ((event.author_association or "").upper() in {a.upper() for a in policy.trust.allowed_associations}
               and (author_permission is None or author_permission.lower() in trust.WRITE_PERMISSIONS))
    by_trust = trusted and (not event.is_fork or policy.trust.allow_forks)
    return not by_trust and policy.trust.trigger_label in event.labels


# The policy, or how to read it for an event: the base's copy (kforge_bot.config.policy.load_policy_from_base).
PolicySource = Callable[[Any], Any]


def decide(env: ActionEnv, policy: Any, gh: Any, log: Log) -> tuple[Any, trust.Decision, bool, Any]:
    """(event, decision, let in by the label, the policy). An `Ignored` event comes back with allowed False.
    `policy` is a Policy, or a PolicySource called with the complete event (so the base's copy can be read)."""
    event = events.load_event(env.event_path, env.event_name)
    if isinstance(event, events.Ignored):
        return event, trust.Decision(False, event.reason), False, None
    if event.repository.lower() != env.repository.lower():
        raise KforgeError(f"the event is for {event.repository}, not GITHUB_REPOSITORY {env.repository}",
                          path=env.event_path)
    if not event.complete:
        event = event.with_pull(gh.get_pull(event.number))
    if callable(policy):
        policy = policy(event)
    trusted = {a.upper() for a in policy.trust.allowed_associations}
    # Permission matters only for an association that would be trusted (a read-only COLLABORATOR is not).
    author_permission = None
    if event.author and (event.author_association or "").upper() in trusted:
        author_permission = gh.permission(event.author)
    sender_permission = None
    if event.event_name == "issue_comment" and event.sender and (event.sender_association or "").upper() in trusted:
        sender_permission = gh.permission(event.sender)
    decision = trust.decide(event, trigger_label=policy.trust.trigger_label,
                            trusted_associations=policy.trust.allowed_associations,
                            allow_forks=policy.trust.allow_forks, author_permission=author_permission,
                            sender_permission=sender_permission)
    return event, decision, decision.allowed and _label_run(event, policy, author_permission), policy


def optimize_changed(env: ActionEnv, event: Any, policy: Any, options: Options, optimize: OptimizeFn,
                     report: PrReport, log: Log) -> None:
    """Find the PR's changed kernels and optimize each on this runner's target."""
    repo = Path(env.workspace)
    head_sha, base_sha = event.head_sha, event.base_sha
    for sha in (head_sha, base_sha):
        gitops.ensure_commit(repo, sha)
    merge_base = gitops.merge_base(repo, base_sha, head_sha)
    targets = [choose_target(t) for t in (options.targets or ("auto",))]
    with contextlib.ExitStack() as stack:
        # The base is the target branch's tip; the branch point only tells what the PR itself changed.
        base_root = stack.enter_context(gitops.worktree(repo, base_sha)).resolve()
        head_root = stack.enter_context(gitops.worktree(repo, head_sha)).resolve()
        fork_root = (stack.enter_context(gitops.worktree(repo, merge_base)).resolve()
                     if merge_base != base_sha else None)
        kernels = changed_kernels(repo, merge_base, head_sha, policy, head_root, base_root, report.notes, fork_root)
        log(f"{len(kernels)} changed kernel(s): {', '.join(k.id for k, _, _ in kernels) or 'none'}")
        one = _OptimizeOne(event.labels, policy, options, optimize, targets, base_root, head_root, log)
        for kernel, old, fork in kernels:
            report.kernels.append(one(kernel, old, fork))


@dataclass(frozen=True)
class _OptimizeOne:
    """One changed kernel's outcome on this runner: skipped (with why), not optimized, or its best candidate."""

    pr_labels: Sequence[str]  # a maintainer's label approves a change to a kernel's test
    policy: Any
    options: Options
    optimize: OptimizeFn
    targets: Sequence[TargetChoice]
    base_root: Path
    head_root: Path
    log: Log

    def __call__(self, kernel: kernels.Kernel, old: kernels.Kernel | None, fork: kernels.Kernel | None
                 ) -> KernelOutcome:
        policy, log = self.policy, self.log
        if kernel.spec is None:
            return skipped(kernel.id, kernel.name, kernel.file,
                           f"does not load: {kernel.error}".replace(f"{self.head_root}{os.sep}", ""))
        spec, spec_note, blocked = judged(kernel, old, policy, self.pr_labels, fork)
        rule = policy.rule_for(kernel.name, old.file if old is not None else kernel.file)  # the base's path
        if rule.skip:
            return skipped(kernel.id, kernel.name, kernel.file, f"skipped by the policy ({rule.matched})")
        kind, chosen, why = _first_target(self.targets, spec.targets)  # the base's targets
        if kind is None or chosen is None:
            return skipped(kernel.id, kernel.name, kernel.file, why)
        if kernel.spec.format == "manifest" and not policy.allows_language(kernel.spec.language):
            return skipped(kernel.id, kernel.name, kernel.file, f"written in {kernel.spec.language}; the policy "
                           f"allows candidates only in {', '.join(policy.languages)}")
        runs_on = chosen.runner or kind  # the report's name for it: the runner class when one was named
        labels: tuple[str, ...] = tuple(get_runner(chosen.runner).labels) if chosen.runner else ()
        log(f"{kernel.name}: optimizing on {runs_on}" + (f" ({spec_note})" if spec_note else ""))
        options = self.options
        try:
            source, result, how = self.optimize(spec, kind, policy, iterations=options.iterations,
                                                model=options.model, models=options.models,
                                                timing_budget_s=options.timing_budget_s,
                                                work_dir=options.work_dir, log=log)
        except KforgeError as exc:  # this kernel cannot be optimized (it fails its test): the others go on
            why = str(exc).replace(f"{self.head_root}{os.sep}", "").replace(f"{self.base_root}{os.sep}", "")
            log(f"{kernel.name}: not optimized: {why}")
            failed = skipped(kernel.id, kernel.name, kernel.file, f"not optimized: {why}", target=runs_on)
            return with_spec_note(failed, spec_note, blocked)
        # The kernel's text as the spec loader read it (inside the checkout), not the file again.
        baseline_source = kernel_implementation(kernel.spec).source
        run = outcome_for(kernel.id, kernel.name, kernel.file, kernel.format, target=runs_on, kind=kind,
                          labels=labels, baseline_source=baseline_source, candidate=source, result=result,
                          how=how, min_speedup=policy.min_speedup, spec=spec)
        if run.qualifies and source is not None:  # the model's number beside the kernel's (docs/workloads.md)
            ends = follow_up_workloads(kernel, self.base_root, self.head_root, source, kind, policy, log)
            run = with_workloads(run, [workload_row(w) for w in ends], policy.require_workload_gain)
        run = with_spec_note(run, spec_note, blocked)
        log(f"{kernel.name}: {'improvement' if run.qualifies else run.evidence.skip_reason}")
        return run


def _first_target(targets: Sequence[TargetChoice], spec_targets: Sequence[str]
                  ) -> tuple[str | None, TargetChoice | None, str]:
    """(device kind, the target that has it, why none) for the first of `targets` the kernel runs on."""
    kind, why = None, ""
    for target in targets:
        kind, why = target.kernel_kind(spec_targets)
        if kind is not None:
            return kind, target, why
    return kind, None, why


def publish(env: ActionEnv, event: Any, report: PrReport, gh: Any, log: Log) -> None:
    """Branches and follow-up PRs for the qualifying kernels, then the comment and the status."""
    runs = []
    for run in report.kernels:
        outcome = run.evidence
        if run.qualifies and run.candidate is not None:
            if event.is_fork or (event.head_repo or "").lower() != env.repository.lower():
                outcome = replace(outcome, skip_reason=f"the PR's branch is in {event.head_repo or 'a deleted fork'}; "
                                                       "a follow-up PR can only target this repository's branches "
                                                       "(the candidate is in the results file)")
            else:
                branch = gitops.bot_branch(event.number, outcome.kernel)
                path = outcome.candidate_path or outcome.file
                push = gitops.push_bot_branch(env.workspace, branch=branch, parent=event.head_sha,
                                              files={path: run.candidate}, message=evidence.render_title(outcome))
                log(f"{outcome.kernel}: branch {branch} {push.status}")
                if push.status == "human-pushed":
                    outcome = replace(outcome, skip_reason=f"someone else pushed to {branch}; "
                                                           "kforge-bot no longer updates it")
                else:
                    outcome = replace(outcome, branch=branch)
                    pr = gh.open_or_update_follow_up(
                        branch=branch, base=event.head_ref, base_repo=event.head_repo or "",
                        title=evidence.render_title(outcome),
                        body=evidence.render_pr_body(outcome, pr_number=event.number, head_branch=event.head_ref,
                                                     run_url=env.run_url))
                    log(f"{outcome.kernel}: follow-up PR #{pr.number} {pr.action}")
                    outcome = replace(outcome, pr_url=pr.url, pr_number=pr.number)
        runs.append(replace(run, evidence=outcome))
    report.kernels = runs
    outcomes = [r.evidence for r in runs]
    comment = gh.upsert_comment(event.number, evidence.render_comment(outcomes, pr_number=event.number),
                                evidence.comment_marker(event.number))
    report.comment_url = comment.url
    failed = [r for r in runs if r.result is None and r.kind is not None]
    gh.set_status(event.head_sha, "success", evidence.status_description(outcomes), target_url=env.run_url)
    report.published = True
    if failed:
        report.notes.append(f"{len(failed)} kernel(s) produced no measurement")


def run_pr(env: ActionEnv, policy: Any | PolicySource, options: Options, *, gh: Any, optimize: OptimizeFn | None = None,
           aggregate_dir: str | Path | None = None, log: Log = lambda _m: None) -> PrReport:
    """The whole command. Raises KforgeError for bad input; a skip returns a report with allowed False."""
    event, decision, via_label, policy = decide(env, policy, gh, log)
    number = getattr(event, "number", None)
    report = PrReport(repository=env.repository, pr=number, decision=decision.reason, allowed=decision.allowed,
                      head_sha=getattr(event, "head_sha", None), base_sha=getattr(event, "base_sha", None))
    log(f"{'run' if decision.allowed else 'skip'}: {decision.reason}")
    if not decision.allowed:
        return report
    if event.command == "stop":
        report.notes.append(stop(env, event, gh, log))
        return report
    if aggregate_dir is not None:
        docs = [d for d in load_results_dir(aggregate_dir) if d.get("pr") in (None, event.number)]
        report.kernels = aggregate(docs, policy.required_targets, policy.min_speedup, policy.require_workload_gain)
    else:
        if optimize is None:
            raise KforgeError("internal: no optimizer given")
        if options.publish:
            gh.set_status(event.head_sha, "pending", "optimizing the changed kernels", target_url=env.run_url)
        optimize_changed(env, event, policy, options, optimize, report, log)
    if options.publish:
        publish(env, event, report, gh, log)
        if via_label:
            # A label admits the commits it was given to; later pushes need a maintainer's look again.
            gh.remove_label(event.number, policy.trust.trigger_label)
            report.notes.append(f"removed the '{policy.trust.trigger_label}' label: new commits need it again")
    return report


def stop(env: ActionEnv, event: Any, gh: Any, log: Log) -> str:
    """`/kforge stop`: close the bot's open follow-up PRs of this PR (their branches stay)."""
    closed = []
    for branch in gitops.remote_branches(env.workspace, f"kforge/pr-{int(event.number)}/*",
                                         what="cannot list the bot's branches"):
        pr = gh.find_follow_up(branch)
        if pr is not None:
            gh.close_pull(pr.number, comment=f"Closed by `/kforge stop` from @{event.sender}.")
            closed.append(pr.number)
    log(f"/kforge stop: closed {len(closed)} follow-up PR(s)")
    return f"/kforge stop: closed {', '.join(f'#{n}' for n in closed) or 'no follow-up PRs'}"

