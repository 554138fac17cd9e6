"""`run_gate`: the whole gate. Checks out base and head, finds the managed kernels, plans each one
(kforge_bot/gate/plan.py: unchanged, a verdict without measuring, or what to measure), measures what it must
(kforge_bot/gate/measure.py) and reports."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from kforge_bot import gitops
from kforge_bot.cache import ResultCache
from kforge_bot.config.policy import Policy
from kforge_bot.errors import KforgeError
from kforge_bot.gate.base_spec import judged_spec
from kforge_bot.gate.decision import CACHEABLE, fmt_threshold, stricter
from kforge_bot.evaluate.session import EvaluateFn
from kforge_bot.gate.measure import Measurement, compare
from kforge_bot.gate.plan import Planner, ToMeasure
from kforge_bot.gate.report import GateReport, KernelReport, report_from
from kforge_bot.gate.required_targets import required_targets
from kforge_bot.hardware import get_runner
from kforge_bot.machine.cache_dirs import cache_inside_checkout, user_cache_dir
from kforge_bot.kernelspec import has_own_reference, kernel_implementation
from kforge_bot.kernelspec.kernels import Kernel, discover
from kforge_bot.targets import TargetChoice, choose_target
from kforge_bot.targets.fingerprint import TargetFingerprint, probe_fingerprint
from kforge_bot.workloads.gate import gate_workloads

Log = Callable[[str], None]


def repo_root(path: str | Path) -> Path:
    top = gitops.toplevel(path)
    if top is None:
        raise KforgeError("not inside a git repository", path=path,
                          hint="run the gate in a clone (actions/checkout with fetch-depth: 0)")
    return top


def run_gate(repo: str | Path, base: str, head: str = "HEAD", *, policy: Policy, all_kernels: bool = False,
             target: str | TargetChoice = "auto", cache_dir: str | Path | None = None, use_cache: bool = True,
             timing_budget_s: float | None = None, fingerprints: Mapping[str, TargetFingerprint] | None = None,
             log: Log | None = None, evaluator: EvaluateFn | None = None, measure: bool = True,
             before_first_run: Callable[[], None] | None = None,
             require_all_targets: bool | None = None, spec_change_approved: bool = False,
             only: Collection[str] = ()) -> GateReport:
    """Run the gate. `fingerprints` pins the target fingerprint per kind (otherwise probed);
    `measure=False` plans only: it reports cache hits and what would be measured, measuring nothing.
    `require_all_targets` (default: the policy's) makes an unmeasured required target fail the run.
    `spec_change_approved`: a maintainer's label lets a change to a kernel's own test count (otherwise
    such a kernel is `spec-changed`, judged under the base's test only). `only`: the kernels (ids or names) to
    plan, the others left out of the report (bisect's). Pass the base's policy
    (kforge_bot.config.policy.load_policy_from_base)."""

    started = time.monotonic()
    say = log or (lambda _msg: None)
    target = choose_target(target)
    required = required_targets(policy)
    strict_targets = policy.gate.require_all_targets if require_all_targets is None else require_all_targets
    root = repo_root(repo)
    revs = _Revisions.of(root, base, head)
    chosen, cache = _cache_for(root, cache_dir, use_cache)
    report = _empty_report(root, base, head, revs, policy, all_kernels, cache, strict_targets)
    if use_cache and cache is None:
        _note(report, say, f"the result cache {chosen} lies inside the checkout under test, where a pull request "
                           "can commit entries: not used (point --cache-dir or $KFORGE_CACHE_DIR outside it)")
    fingerprint = _fingerprints(target, fingerprints)

    with contextlib.ExitStack() as stack:
        base_root, head_root, fork_root = _check_out(stack, root, revs, say)
        base_kernels, fork_kernels, head_kernels = _kernels_of_each(policy, base_root, head_root, fork_root,
                                                                    report.notes)
        report.removed.extend(_gone(fork_kernels, head_kernels, head_root))  # removed by this change
        planner = Planner(policy, target, required, head_root, base_root, revs.changed, all_kernels, timing_budget_s,
                          cache, fingerprint, measure, report.targets, spec_change_approved, fork_root)
        runs = _Runs(planner, cache, evaluator, say, before_first_run)
        for kid in sorted(head_kernels):
            kernel = head_kernels[kid]
            if not only or kid in only or kernel.name in only:
                runs.plan_one(report, kid, kernel, base_kernels.get(kid), fork_kernels.get(kid))
        # The workloads that use the changed kernels, end to end (kforge_bot/workloads/gate.py).
        report.workloads.extend(gate_workloads(base_root, head_root, revs.changed, policy, target,
                                               head_kernels.values(), report.kernels, policy.eval_settings("gate"),
                                               say, measure))
    if cache is not None and cache.rejected:
        _note(report, say, f"ignored {len(cache.rejected)} cache entr{'y' if len(cache.rejected) == 1 else 'ies'} "
                           f"that failed authentication (not written by this machine's bot) and measured again: "
                           + ", ".join(Path(p).name for p in cache.rejected[:3]))
    report.wall_s = time.monotonic() - started
    return report


@dataclass(frozen=True)
class _Revisions:
    """The three commits a gate run compares, and the change's paths."""

    base_sha: str
    head_sha: str
    merge_base: str
    changed: set[str]

    @classmethod
    def of(cls, root: Path, base: str, head: str) -> _Revisions:
        head_sha = gitops.resolve(root, head)
        base_sha = gitops.resolve(root, base)
        merge_base = gitops.merge_base(root, base_sha, head_sha)
        # the pull request's own diff, as GitHub shows it
        return cls(base_sha, head_sha, merge_base, _changed_paths(root, merge_base, head_sha))


def _empty_report(root: Path, base: str, head: str, revs: _Revisions, policy: Policy, all_kernels: bool,
                  cache: ResultCache | None, strict_targets: bool) -> GateReport:
    """The report before any kernel is planned: what was compared, under which policy, with which cache."""
    return GateReport(repo=str(root), base_ref=base, head_ref=head, base_sha=revs.base_sha, head_sha=revs.head_sha,
                      merge_base=revs.merge_base, kernels=[], policy=policy.source, all_kernels=all_kernels,
                      cache_dir=str(cache.directory) if cache else None,
                      required_targets=list(policy.required_targets), require_all_targets=strict_targets,
                      all_skipped=policy.gate.all_skipped)


def _note(report: GateReport, say: Log, note: str) -> None:
    report.notes.append(note)
    say(note)


def _check_out(stack: contextlib.ExitStack, root: Path, revs: _Revisions, say: Log
               ) -> tuple[Path, Path, Path | None]:
    """(base, head, branch point) checkouts, removed when `stack` closes; the branch point is None where it is
    the base. The base is the target branch's tip (the author chooses the branch point, not what main holds now);
    the branch point is checked out too where it is another commit: its test judges the head as well."""
    base_sha, head_sha, merge_base = revs.base_sha, revs.head_sha, revs.merge_base
    say(f"checking out {base_sha[:12]} (base), {head_sha[:12]} (head)"
        + (f" and {merge_base[:12]} (branch point)" if merge_base != base_sha else ""))
    base_root = stack.enter_context(gitops.worktree(root, base_sha)).resolve()
    head_root = stack.enter_context(gitops.worktree(root, head_sha)).resolve()
    fork_root = (stack.enter_context(gitops.worktree(root, merge_base)).resolve()
                 if merge_base != base_sha else None)
    return base_root, head_root, fork_root


class _Runs:
    """Plans each kernel and measures those the plan asks for, adding each to the report."""

    def __init__(self, planner: Planner, cache: ResultCache | None, evaluator: EvaluateFn | None, say: Log,
                 before_first_run: Callable[[], None] | None) -> None:
        self.planner, self.cache, self.evaluator, self.say = planner, cache, evaluator, say
        self.before_first_run = before_first_run

    def plan_one(self, report: GateReport, kid: str, kernel: Kernel, base: Kernel | None, fork: Kernel | None) -> None:
        planned = self.planner.plan(kid, kernel, base, fork)
        if planned is None:
            report.unchanged.append(kid)
        elif isinstance(planned, KernelReport):
            report.kernels.append(planned)
            if planned.cached:
                self.say(f"{kernel.name}: cache hit ({planned.verdict})")
        else:
            if self.before_first_run is not None:
                self.before_first_run()  # says whether the code about to run is sandboxed
                self.before_first_run = None
            report.kernels.append(_measure(planned, self.planner, self.cache, self.evaluator, self.say))


def _cache_for(root: Path, cache_dir: str | Path | None, use_cache: bool) -> tuple[Path, ResultCache | None]:
    """(the cache folder chosen, the cache: None where unused, or refused for lying inside the checkout under test).
    One setting for every command's cache: --cache-dir, then $KFORGE_CACHE_DIR (as optimize reads it), then the
    user's cache folder, which actions/cache can carry between runs."""
    chosen = Path(cache_dir) if cache_dir else user_cache_dir()
    if not use_cache or cache_inside_checkout(chosen, root):
        return chosen, None
    return chosen, ResultCache(chosen)


def _kernels_of_each(policy: Policy, base_root: Path, head_root: Path, fork_root: Path | None,
                     notes: list[str]) -> tuple[dict[str, Kernel], dict[str, Kernel], dict[str, Kernel]]:
    """The managed kernels of the base, the branch point (the base's where they are one commit) and the head."""
    base_notes: list[str] = []
    try:
        base_kernels = discover(base_root, policy, strict=False, notes=base_notes)
    except KforgeError as exc:  # a base manifest over the kernel cap: named as the base's path
        raise KforgeError("base: " + str(exc).replace(f"{base_root}{os.sep}", "")) from None
    notes.extend(f"base: {n}" for n in base_notes)
    fork_kernels = discover(fork_root, policy, strict=False) if fork_root is not None else base_kernels
    try:  # the base's kernels stay managed wherever the head moves their files
        head_kernels = discover(head_root, policy, strict=True, notes=notes,
                                keep=set(base_kernels) | set(fork_kernels))
    except KforgeError as exc:  # named as a repository path, not the temporary checkout's
        raise KforgeError(str(exc).replace(f"{head_root}{os.sep}", "")) from None
    return base_kernels, fork_kernels, head_kernels


def _changed_paths(root: Path, merge_base: str, head_sha: str) -> set[str]:
    """Every path the change touches; a renamed file by both its names."""
    changed: set[str] = set()
    for c in gitops.changed_files(root, merge_base, head_sha):
        changed.add(c.path)
        if c.old_path:
            changed.add(c.old_path)
    return changed


def _fingerprints(target: TargetChoice, pinned: Mapping[str, TargetFingerprint] | None
                  ) -> Callable[[str], TargetFingerprint]:
    """Each device kind's fingerprint, probed once (unless pinned); with --target a runner class, the device
    must be of that class."""
    known: dict[str, TargetFingerprint] = dict(pinned or {})

    def fingerprint(kind: str) -> TargetFingerprint:
        if kind not in known:
            known[kind] = probe_fingerprint(kind)
            fp = known[kind]
            if target.runner is not None and kind == target.kind:
                runner = get_runner(target.runner)
                if not runner.is_catch_all and not runner.matches(fp.device_name):
                    raise KforgeError(f"--target {target.runner}: this machine's {kind} device is "
                                      f"{fp.device_name!r}, not a {runner.title}",
                                      hint="run on a runner of that class, or pass the device kind instead")
        return known[kind]

    return fingerprint


def _gone(base_kernels: dict[str, Kernel], head_kernels: dict[str, Kernel], head_root: Path) -> list[str]:
    """The kernels removed in head. A KernelBench file still there that no longer parses as one is not
    removed: it becomes a head kernel that does not load (an error)."""
    removed = []
    for kid in sorted(set(base_kernels) - set(head_kernels)):
        gone = base_kernels[kid]
        if gone.format == "kernelbench" and (head_root / gone.file).is_file():
            head_kernels[kid] = Kernel(kid, gone.name, gone.format, gone.file, None,
                                       "no longer a KernelBench problem (class Model, get_inputs, "
                                       "get_init_inputs) or it does not parse", gone.sources)
        else:
            removed.append(kid)
    return removed


def _measure(plan: ToMeasure, planner: Planner, cache: ResultCache | None, evaluator: EvaluateFn | None,
             say: Log) -> KernelReport:
    """Measure one planned kernel, report it, and keep a verdict that depends on the code alone in the cache."""
    kernel = plan.kernel
    judged = _judge(plan, evaluator, say)
    entry = planner.clean(report_from(kernel, judged.final, plan.rule, plan.kind, plan.touched, new=plan.old is None))
    entry.spec_changes = list(plan.spec_changes)
    _explain(entry, plan, judged, planner)
    entry.key, entry.required = plan.key, plan.required
    say(f"{kernel.name}: {entry.verdict} ({entry.reason})")
    if cache is not None and entry.verdict in CACHEABLE and judged.cacheable:
        cache.put(plan.key, plan.key_material, entry.to_dict())
    return entry


@dataclass(frozen=True)
class _Judged:
    """One kernel's measurements under each test that judges it."""

    final: Measurement  # the verdict that stands
    under_tip: Measurement  # under the base tip's test
    under_fork: Measurement | None  # under the branch point's, where the base branch changed the test since
    under_base: Measurement  # the base's verdict: the stricter of the tip's and the branch point's

    @property
    def cacheable(self) -> bool:
        return (self.final.cacheable and self.under_base.cacheable and self.under_tip.cacheable
                and (self.under_fork is None or self.under_fork.cacheable))


def _judge(plan: ToMeasure, evaluator: EvaluateFn | None, say: Log) -> _Judged:
    """The head's code is judged by the base's test (kforge_bot/gate/base_spec.py); by its own only when it has no
    base, or when a maintainer approved a change to its test."""
    kernel, old, kind, rule = plan.kernel, plan.old, plan.kind, plan.rule
    assert kernel.spec is not None
    head_impl = kernel_implementation(kernel.spec)
    base_impl = None
    spec = kernel.spec
    if plan.usable_base is not None:
        assert old is not None and old.spec is not None
        # Its `root` is the base checkout: the worker imports each implementation with its own
        # repository's local modules, so base and head may both `import helper` and mean two files.
        base_impl = kernel_implementation(old.spec)
        spec = judged_spec(kernel.spec, old.spec)  # the base's reference (its kernel, when it names none)
    say(f"{kernel.name}: measuring {'head against base' if base_impl else 'new kernel against its reference'}"
        f" on {kind} ({plan.device_name}), threshold {fmt_threshold(rule.threshold)}")
    m = compare(spec, head_impl, base_impl, kind, plan.settings, rule.threshold, evaluator=evaluator)
    under_tip, under_fork = m, None
    if plan.fork is not None and plan.fork.spec is not None:
        say(f"{kernel.name}: the base branch changed its test since the branch point "
            f"({', '.join(plan.fork_changes)}): measuring under the branch point's too")
        under_fork = compare(judged_spec(kernel.spec, plan.fork.spec), head_impl, base_impl, kind, plan.settings,
                             rule.threshold, evaluator=evaluator)
        if stricter(under_fork.verdict, m.verdict):
            m = under_fork
    under_base = m
    if plan.spec_changes and plan.approved:
        say(f"{kernel.name}: its test changed ({', '.join(plan.spec_changes)}), approved: measuring under the head's")
        oracle = None if has_own_reference(kernel.spec) else base_impl
        m = compare(kernel.spec, head_impl, base_impl, kind, plan.settings, rule.threshold, oracle=oracle,
                    evaluator=evaluator)
    return _Judged(m, under_tip, under_fork, under_base)


def _explain(entry: KernelReport, plan: ToMeasure, judged: _Judged, planner: Planner) -> None:
    """Say in the entry's reason (and `under_spec`) which test judged it, and turn a head whose test changed
    without approval into `spec-changed`."""
    label = planner.policy.trust.spec_change_label
    under_base, under_tip, under_fork = judged.under_base, judged.under_tip, judged.under_fork
    if plan.spec_changes:
        parts = ", ".join(plan.spec_changes)
        entry.under_spec = {"base": under_base.verdict}
        base_said = planner.clean_text(f"{under_base.verdict}: {under_base.reason}")
        if plan.approved:
            entry.under_spec["head"] = judged.final.verdict
            entry.reason = (f"the change edits this kernel's {parts}, approved with the '{label}' label; under the "
                            f"head's spec: {entry.reason}; under the base's spec: {base_said}")
        else:
            entry.verdict = "spec-changed"
            entry.reason = (f"the change edits this kernel's {parts}: judged under the base's spec it is "
                            f"{base_said}; the head's spec counts once a maintainer adds the '{label}' label")
    elif plan.old is None:
        entry.reason = f"judged under its own spec (new in head: no base to take one from); {entry.reason}"
    elif plan.usable_base is None:
        entry.reason = (f"the base version does not load, so it was judged under its own spec and only correctness "
                        f"was checked; {entry.reason}")
    if under_fork is not None:
        entry.under_spec = {**(entry.under_spec or {}), "tip": under_tip.verdict, "branch_point": under_fork.verdict}
        entry.reason += (f"; the base branch changed this kernel's {', '.join(plan.fork_changes)} since the branch "
                         f"point: judged under both, the stricter stands (tip: {under_tip.verdict}, branch point: "
                         f"{under_fork.verdict})")
