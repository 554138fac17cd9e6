"""The gate's plan for each managed kernel, before anything is measured: unchanged (what its result depends on,
its files and spec, is the same in base and head), a one-line verdict that needs no measurement (it does not
load, the policy skips it, this machine has none of its targets, the result cache has it, or the run only
plans), or what to measure (`ToMeasure`): where, under which rule and settings, with which cache key. The PR bot
finds its changed kernels by the same `material`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kforge_bot.cache import ResultCache, cache_key, file_digests, portable
from kforge_bot.config.policy import GateRule, Policy
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.gate.base_spec import judged_spec, spec_changes
from kforge_bot.gate.measure import gate_settings
from kforge_bot.gate.report import KernelReport
from kforge_bot.gate.required_targets import required_status
from kforge_bot.kernelspec import kernel_implementation
from kforge_bot.kernelspec.dependencies import local_closure
from kforge_bot.kernelspec.kernels import Kernel
from kforge_bot.targets import TargetChoice
from kforge_bot.targets.fingerprint import TargetFingerprint


def dependencies(kernel: Kernel, checkout: Path) -> list[Path]:
    """The kernel's, reference's and inputs' files and every file in the checkout they can read
    (kforge_bot.kernelspec.dependencies)."""
    checkout = checkout.resolve()
    roots = kernel.spec.source_roots if kernel.spec is not None else [checkout]
    return local_closure([checkout / s for s in kernel.sources], roots, checkout)


def material(kernel: Kernel, checkout: Path) -> dict[str, Any]:
    """What the kernel's result depends on at this revision, free of checkout locations."""
    data: dict[str, Any] = {"files": file_digests(dependencies(kernel, checkout), checkout)}
    if kernel.spec is not None:
        spec = kernel.spec.to_dict()
        spec.pop("name", None)
        data["spec"] = portable(spec)
        data["timed"] = portable(kernel_implementation(kernel.spec).to_dict())
    else:
        data["error"] = kernel.error
    return data


@dataclass
class ToMeasure:
    """A changed kernel the gate measures: on which device kind, under which rule and settings, and the cache
    key its verdict is stored under."""

    kernel: Kernel
    old: Kernel | None  # its base version, None for a kernel new in head
    kind: str
    device_name: str
    rule: GateRule
    settings: EvalSettings
    touched: list[str]
    required: dict[str, str]
    key: str
    key_material: dict[str, Any]
    spec_changes: list[str]  # what the head changed of the kernel's test (empty: judged by the base's alone)
    approved: bool  # a maintainer's label lets the head's test count
    # The kernel at the branch point, where its test there differs from the base tip's (`fork_changes`, what the
    # target branch changed since): the head is judged under both, and the stricter verdict stands.
    fork: Kernel | None = None
    fork_changes: list[str] = field(default_factory=list)

    @property
    def usable_base(self) -> Kernel | None:
        """The base version, when there is one that loads (else only correctness is checked)."""
        return self.old if self.old is not None and self.old.spec is not None else None


@dataclass
class Planner:
    """What the gate does with each kernel of one run (the base branch's tip and the head checked out at `base_root`,
    `head_root`, the branch point at `fork_root`: the same folder where the tip is the branch point)."""

    policy: Policy
    target: TargetChoice  # what --target chose; each kernel's device `kind` follows from it
    required: list[TargetChoice]
    head_root: Path
    base_root: Path
    changed: set[str]  # paths the change touches (renames: both names)
    all_kernels: bool
    timing_budget_s: float | None
    cache: ResultCache | None
    fingerprint: Callable[[str], TargetFingerprint]
    measure: bool
    targets: dict[str, dict[str, str]]  # the report's: each device kind's fingerprint, as it is probed
    spec_change_approved: bool = False  # a maintainer added the policy's trust.spec_change_label to this revision
    fork_root: Path | None = None  # None: the base's tip is the branch point

    def clean(self, entry: KernelReport) -> KernelReport:
        entry.reason = self.clean_text(entry.reason)
        return entry

    def clean_text(self, text: str) -> str:
        # Reasons name files inside the temporary checkouts: show them as repository paths.
        for checkout in (self.head_root, self.base_root, self.fork_root or self.base_root):
            text = text.replace(f"{checkout}{os.sep}", "")
        return text

    def plan(self, kid: str, kernel: Kernel, old: Kernel | None, fork: Kernel | None = None
             ) -> KernelReport | ToMeasure | None:
        """None for an unchanged kernel, a KernelReport when no measurement is needed, else what to measure. `old` is
        the kernel at the base branch's tip, `fork` at the branch point (where that is another commit)."""
        seen = self._versions(kernel, old, fork)
        old, touched = seen.old, seen.touched
        if not self.all_kernels and seen.since_mat == seen.head_mat:
            return None
        if kernel.spec is None:
            return self.clean(KernelReport(kid, kernel.name, kernel.file, kernel.format, "error",
                                           f"does not load: {kernel.error}", touched_by=touched, new=old is None))
        edits = _edits(kernel, old, seen.fork, self.spec_change_approved)
        usable_base, changes = edits.base, edits.changes
        # The base's rules decide where a kernel is measured and which policy rule applies: its targets (unless a
        # maintainer approved the change to its test) and its path (a change cannot move a kernel under a skip rule).
        ruled = judged_spec(kernel.spec, usable_base.spec) if usable_base is not None and not edits.approved \
            else kernel.spec
        path = old.file if old is not None else kernel.file
        rule = self.policy.rule_for(kernel.name, path)  # skip does not depend on the target
        if rule.skip:
            why = f"skipped by the policy ({rule.matched}" + (f": {rule.reason})" if rule.reason else ")")
            return KernelReport(kid, kernel.name, kernel.file, kernel.format, "skipped", why, rule=rule.matched,
                                touched_by=touched)
        kind, why = self.target.kernel_kind(ruled.targets)
        if kind is None:
            needs = required_status(self.required, ruled, None, "", self.target)
            return KernelReport(kid, kernel.name, kernel.file, kernel.format, "skipped", why, touched_by=touched,
                                required=needs, spec_changes=changes)
        fp = self.fingerprint(kind)
        self.targets[kind] = fp.to_dict()
        rule = self.policy.rule_for(kernel.name, path, kind)  # the threshold for this target kind
        needs = required_status(self.required, ruled, kind, fp.device_name, self.target)
        settings = gate_settings(self.policy, rule, self.timing_budget_s)
        key_material = {"kernel": kid, "head": seen.head_mat, "base": seen.base_mat if usable_base else None,
                        "rule": {"threshold": rule.threshold, "confidence": rule.confidence},
                        "settings": settings.key_material(), "target": fp.to_dict(),
                        "spec_changes": changes, "approved": edits.approved,
                        "fork": material(edits.fork, seen.fork_root) if edits.fork_changes and edits.fork else None}
        key = cache_key(key_material)
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            return _from_cache(hit, kid, kernel, touched, key, needs)
        if not self.measure:
            return KernelReport(kid, kernel.name, kernel.file, kernel.format, "skipped",
                                "plan only: not in the cache, would be measured", target=kind, key=key,
                                touched_by=touched, new=usable_base is None, threshold=rule.threshold,
                                confidence=rule.confidence, threshold_from=rule.threshold_from, required=needs,
                                spec_changes=changes)
        return ToMeasure(kernel, old, kind, fp.device_name, rule, settings, touched, needs, key, key_material, changes,
                         edits.approved, edits.fork if edits.fork_changes else None, edits.fork_changes)

    def _versions(self, kernel: Kernel, old: Kernel | None, fork: Kernel | None) -> _Versions:
        """Which base and branch-point versions judge the head, and what the change touches of them."""
        fork_root = self.fork_root or self.base_root
        old_root = self.base_root
        if fork_root == self.base_root:
            fork = old
        elif old is None and fork is not None:
            # The target branch removed the kernel since the branch point: the branch point's version is the base
            # (without one, the head would be a new kernel, judged under a test of its own writing).
            old, old_root = fork, fork_root
        # What the change touches, and whether it changes the kernel at all, is the pull request's own diff (the
        # branch point's version against the head's): a kernel only the target branch moved on is not this change's.
        since, since_root = (fork, fork_root) if fork is not None else (old, self.base_root)
        head_deps = dependencies(kernel, self.head_root)
        since_deps = dependencies(since, since_root) if since is not None else []
        head_mat = material(kernel, self.head_root)
        base_mat = material(old, old_root) if old is not None else None
        since_mat = material(since, since_root) if since is not None else None
        touched = sorted(self.changed & {p.relative_to(self.head_root).as_posix() for p in head_deps}
                         | self.changed & {p.relative_to(since_root).as_posix() for p in since_deps})
        return _Versions(old, fork, fork_root, head_mat, base_mat, since_mat, touched)


@dataclass(frozen=True)
class _Versions:
    """A head kernel's base version (the branch point's where the target branch removed it), its branch point's,
    the materials of each, and the change's paths it depends on."""

    old: Kernel | None
    fork: Kernel | None  # the base's, where the branch point is the base tip
    fork_root: Path
    head_mat: dict[str, Any]
    base_mat: dict[str, Any] | None
    since_mat: dict[str, Any] | None  # the version the change starts from: the branch point's
    touched: list[str]


@dataclass(frozen=True)
class _Edits:
    """What the head changed of a kernel's test, and what the target branch changed of it since the branch point."""

    base: Kernel | None  # the base version, where it loads
    fork: Kernel | None  # the branch point's version, where it loads and is not the base's
    changes: list[str]  # the head's own edits to its test
    fork_changes: list[str]
    approved: bool


def _edits(kernel: Kernel, old: Kernel | None, fork: Kernel | None, label_added: bool) -> _Edits:
    assert kernel.spec is not None
    usable_base = old if old is not None and old.spec is not None else None
    changes = spec_changes(usable_base.spec, kernel.spec) if usable_base is not None and usable_base.spec else []
    usable_fork = fork if fork is not None and fork.spec is not None and fork is not old else None
    fork_changes = spec_changes(usable_fork.spec, usable_base.spec) if usable_fork and usable_base else []
    if usable_fork is not None:  # the head's edits: what differs from both the tip and the branch point
        head_edits = spec_changes(usable_fork.spec, kernel.spec)
        changes = [part for part in changes if part in head_edits]
    return _Edits(usable_base, usable_fork, changes, fork_changes, bool(changes) and label_added)


def _from_cache(hit: dict[str, Any], kid: str, kernel: Kernel, touched: list[str], key: str,
                needs: dict[str, str]) -> KernelReport:
    """A cached verdict, reported as this run's kernel."""
    cached = KernelReport.from_dict(hit)
    cached.id, cached.file, cached.cached, cached.measured = kid, kernel.file, True, False
    cached.touched_by, cached.key, cached.wall_s, cached.required = touched, key, 0.0, needs
    return cached
