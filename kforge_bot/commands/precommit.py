"""`kforge-bot precommit FILES...`: the `kforge-check` pre-commit hook.

For the staged files pre-commit passes: every staged kforge.yaml and policy file (policies/*.yml) is
validated, and every managed kernel that depends on a staged file (its kernel, reference or inputs
file, a local file they import, or its changed manifest entry) gets a quick correctness check of the
working version (no timing). The oracle is the kernel's reference when the manifest names one (or
a KernelBench file's Model, for its ModelNew); a kernel that is its own reference is checked
against its committed version (HEAD), and a new one against itself (it must run and give finite,
non-constant, repeatable outputs). On a machine without any of a kernel's targets the check is
skipped and says so: validation still runs, and a skip does not block the commit.

Exit codes: 0 everything checked passed (or was skipped), 1 a check failed, 2 usage error.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

import click

from kforge_bot import gitops
from kforge_bot.commands import examples, target_option
from kforge_bot.config.policy import Policy, load_policy
from kforge_bot.config import reader
from kforge_bot.config.yamlcheck import load_yaml_text
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.isolation import announcement
from kforge_bot.gate.decision import harness_verdict
from kforge_bot.gate.plan import dependencies
from kforge_bot.kernelspec import MANIFEST_NAME, has_own_reference, kernel_implementation, load_manifest
from kforge_bot.kernelspec.kernels import Kernel, discover
from kforge_bot.targets import TargetChoice, choose_target

_POLICY_SUFFIXES = (".yml", ".yaml")
_SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".cl", ".metal", ".ptx",
                    ".sycl", ".yaml", ".yml")


def _is_policy_file(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return len(parts) >= 2 and parts[-2] == "policies" and rel.endswith(_POLICY_SUFFIXES)


def _root() -> tuple[Path, bool]:
    top = gitops.toplevel(Path.cwd())
    return (top, True) if top is not None else (Path.cwd().resolve(), False)


def _has_head(root: Path) -> bool:
    return gitops.has_commit(root, "HEAD")


def export_head(root: Path, dest: Path) -> None:
    """The committed tree's source files, written under `dest`."""
    gitops.export_tree(root, "HEAD", dest, keep=lambda name: name.endswith(_SOURCE_SUFFIXES))


def _kernel_entry(data: object, name: str) -> object:
    """A manifest's entry for kernel `name`, from its parsed YAML (None when there is none)."""
    kernels = data.get("kernels") if isinstance(data, dict) else None
    return kernels.get(name) if isinstance(kernels, dict) else None


def _head_manifest_entry(root: Path, manifest_rel: str, name: str) -> object:
    try:
        text = gitops.read_file_at(root, "HEAD", manifest_rel)
    except KforgeError:
        return None
    if text is None:
        return None
    try:
        return _kernel_entry(load_yaml_text(text, manifest_rel), name)
    except KforgeError:
        return None


def _working_manifest_entry(path: Path, name: str, root: Path) -> object:
    try:
        data = reader.read_yaml(path, root)
    except KforgeError:
        return None
    return _kernel_entry(data, name)


@click.command("precommit", epilog=examples(
    "kforge-bot precommit kernels/softmax.py    # what the pre-commit hook runs on staged kernel files"))
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@target_option("Where to check.")
@click.option("--policy", "policy_path", default=None,
              help="Policy file (or a shipped one: default, strict). Default: the shipped default policy.")
def precommit(files: tuple[Path, ...], target: str, policy_path: str | None) -> int:
    """Validate staged manifests and policies, and check staged kernels for correctness (no timing)."""
    root, in_git = _root()
    policy = load_policy(policy_path)
    chosen = choose_target(target)
    rel_files: set[str] = set()
    for f in files:
        path = (Path.cwd() / f).resolve()
        try:
            rel_files.add(path.relative_to(root).as_posix())
        except ValueError:
            raise KforgeError("file is outside the repository", path=f) from None

    problems: list[str] = []
    lines = _validate(root, rel_files, problems)
    notes: list[str] = []
    kernels = discover(root, policy, strict=False, notes=notes)
    selected = [kernel for kernel in kernels.values() if _touched(kernel, root, rel_files)]

    def say(text: str) -> None:
        click.echo(f"kforge-check: {text}")

    for line in lines:
        say(line)
    if not selected:
        say("no staged change touches a managed kernel" if not problems else "no kernel to check")
    else:
        say(announcement(policy.isolation_mode("precommit")))

    committed = _Committed(root, in_git, policy)
    try:
        for kernel in sorted(selected, key=lambda k: k.id):
            _check(kernel, policy, chosen, committed, problems, say)
    finally:
        committed.cleanup()
    for note in notes:
        say(f"note: {note}")
    for problem in problems:
        click.echo(f"kforge-check: FAILED: {problem}", err=True)
    if problems:
        click.echo(f"kforge-check: {len(problems)} problem(s); fix them or commit with --no-verify to skip the hook",
                   err=True)
    return 1 if problems else 0


def _validate(root: Path, rel_files: set[str], problems: list[str]) -> list[str]:
    """Each staged manifest and policy file, loaded: a line for each valid one, a problem for each invalid one."""
    lines: list[str] = []
    for rel in sorted(rel_files):
        path = root / rel
        if not path.is_file():
            continue  # a staged deletion
        if PurePosixPath(rel).name == MANIFEST_NAME:
            try:
                load_manifest(path)
                lines.append(f"{rel}: valid manifest")
            except KforgeError as exc:
                problems.append(str(exc))
        elif _is_policy_file(rel):
            try:
                load_policy(path)
                lines.append(f"{rel}: valid policy")
            except KforgeError as exc:
                problems.append(str(exc))
    return lines


def _touched(kernel: Kernel, root: Path, rel_files: set[str]) -> bool:
    """Whether a staged file is one the kernel depends on, or its manifest entry changed."""
    deps = {p.relative_to(root).as_posix() for p in dependencies(kernel, root) if p.is_relative_to(root)}
    if deps & rel_files:
        return True
    manifest_rel = kernel.manifest
    return manifest_rel is not None and manifest_rel in rel_files and \
        _working_manifest_entry(root / manifest_rel, kernel.name, root) != _head_manifest_entry(root, manifest_rel,
                                                                                           kernel.name)


class _Committed:
    """The committed (HEAD) versions of the kernels, exported once, when a kernel without a reference needs
    its committed version as the oracle."""

    def __init__(self, root: Path, in_git: bool, policy: Policy) -> None:
        self.root, self.in_git, self.policy = root, in_git, policy
        self.tree: Path | None = None
        self.kernels: dict[str, Kernel] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="kforge-precommit-")

    def get(self, kernel_id: str) -> Kernel | None:
        if self.tree is None and self.in_git and _has_head(self.root):
            self.tree = Path(self._tmp.name) / "HEAD"
            export_head(self.root, self.tree)
            self.kernels = discover(self.tree, self.policy, strict=False)
        committed = self.kernels.get(kernel_id)
        return committed if committed is not None and committed.spec is not None and self.tree is not None else None

    def cleanup(self) -> None:
        self._tmp.cleanup()


def _check(kernel: Kernel, policy: Policy, target: TargetChoice, committed: _Committed, problems: list[str],
           say: Callable[[str], Any]) -> None:
    """One kernel's correctness check (no timing) against its oracle; a failure is added to `problems`."""
    if kernel.spec is None:
        problems.append(f"{kernel.file}: kernel {kernel.name!r} does not load: {kernel.error}")
        return
    rule = policy.rule_for(kernel.name, kernel.file)
    if rule.skip:
        say(f"{kernel.name}: skipped by the policy ({rule.matched})")
        return
    kind, why = target.kernel_kind(kernel.spec.targets)
    if kind is None:
        say(f"{kernel.name}: correctness check SKIPPED: {why} (its manifest entry and files were validated)")
        return
    spec = kernel.spec
    oracle = None
    against = "its reference"
    if not has_own_reference(spec):
        old = committed.get(kernel.id)
        if old is not None:
            assert old.spec is not None
            # rooted in the exported tree: the worker gives it that tree's local modules
            oracle = kernel_implementation(old.spec)
            against = "the committed (HEAD) version"
        else:
            against = "itself (new kernel without a reference: it must run and give sane outputs)"
    judged = replace(spec, reference=oracle) if oracle is not None else spec
    # Correctness only; a repository's own kernels may call framework ops (their business, as in the gate).
    settings = policy.eval_settings("precommit", measure=False, profile=False, allow_framework_fallback=True)
    say(f"{kernel.name}: checking {kernel.file} against {against} on {kind} ...")
    try:
        result = evaluate(judged, kernel_implementation(spec), kind, settings, baseline=judged.reference)
    except KforgeError as exc:
        problems.append(f"{kernel.name}: the oracle or the inputs fail: {exc}")
        return
    bad = harness_verdict(result)
    if bad:
        problems.append(f"{kernel.file}: kernel {kernel.name!r} is {bad[0]}: {bad[1]}")
        return
    cases = result.correctness.get("cases_checked", 0)
    say(f"{kernel.name}: correct ({cases} cases, max abs error "
        f"{result.correctness.get('max_abs_error', 0.0):.3g})")
