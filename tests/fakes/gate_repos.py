"""Tiny CPU kernels in real git repositories, for the gate's tests: a reference, kernels that compute the
same, a helper a kernel imports, a KernelBench problem, a manifest and a policy, and the CLI run in a child."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from fakes.gitrepos import commit_all, git, write
from kforge_bot.kernelspec import KernelSpec, load_spec

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# Its sitecustomize turns the timing-disturbance detector off in the processes the suite starts (tests/conftest.py).
QUIET_MACHINE = Path(__file__).resolve().parent / "quiet_machine"

REF = """\
import torch


def reference(x, y):
    return x * 2.0 + y


def make_inputs(n):
    return torch.randn(n, n), torch.randn(n, n)
"""
PLAIN = """\
import torch


def kernel(x, y):
    return x * 2.0 + y
"""
VIA_HELPER = """\
from helper import scale


def kernel(x, y):
    return scale(x) + y
"""
KB = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""
POLICY = """\
version: 1
gate: {threshold: 0.25, confidence: 0.95}
evaluation: {seeds: 2, timing_budget_s: 1.0, timeout_s: 120}
"""


def entry(name: str, *, file: str | None = None, reference: str = "ref.py:reference",
          inputs: str = "ref.py:make_inputs", extra: str = "", sizes: Sequence[int] = (128,)) -> str:
    """One kernel's `kforge.yaml` entry: `name` (its file `<name>.py`) against REF on the CPU, a shape set per size,
    and `extra` (more keys, indented as the entry's) after it."""
    shapes = ", ".join(f"{{n: {n}}}" for n in sizes)
    return (f"  {name}:\n    file: {file or name + '.py'}\n    entry: kernel\n    reference: {reference}\n"
            f"    inputs: {inputs}\n    shapes: [{shapes}]\n    targets: [cpu]\n{extra}")


def manifest(names: list[str], n: int = 128) -> str:
    return "version: 1\nkernels:\n" + "".join(entry(name, sizes=(n,)) for name in names)


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), full.get("PYTHONPATH", "")) if p)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "kforge_bot.cli", *args], cwd=cwd, env=full, check=False, capture_output=True,
                          text=True, timeout=timeout)


def by_id(report: dict) -> dict[str, dict]:
    """A gate report's kernels (its JSON) by id."""
    return {k["id"]: k for k in report["kernels"]}


def init_repo(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")


def one_kernel_repo(root: Path, name: str = "k", *, policy: str | None = None, message: str = "base") -> Path:
    """A git repository at `root` whose main holds one correct kernel `name` (PLAIN against REF, on the CPU), its
    manifest and, unless None, `policy` as policy.yml: the base a pull request's head is then written on."""
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, f"{name}.py", PLAIN)
    write(root, "kforge.yaml", manifest([name]))
    if policy is not None:
        write(root, "policy.yml", policy)
    commit_all(root, message)
    return root



def tiny_spec_in(folder: Path) -> KernelSpec:
    """One manifest kernel `k` (PLAIN against REF) in `folder`, loaded."""
    write(folder, "ref.py", REF)
    write(folder, "k.py", PLAIN)
    write(folder, "kforge.yaml", manifest(["k"]))
    return load_spec(folder / "kforge.yaml")


def slow_where(condition: str, reps: int) -> str:
    """REF's kernel doing `reps` times the work only on the shape sets where `condition` (on n, the first input's
    rows) holds: a kernel whose speed genuinely differs per shape set. The slowdowns the per-shape tests use are
    30x and more, so their verdicts hold on a busy 2-core machine."""
    return f"""\
import torch


def kernel(x, y):
    n = x.shape[0]
    if {condition}:  # redundant work on these shape sets only
        out = x * 2.0 + y
        for _ in range({reps}):
            out = x * 2.0 + y
        return out
    return x * 2.0 + y
"""


# Slow on the large shape sets (the base) / slow on the small one (the head): faster on one, far slower on the other.
SLOW_ON_LARGE = slow_where("n > 64", 30)
SLOW_ON_SMALL = slow_where("n <= 64", 300)


def shaped_manifest(name: str, sizes: list[int]) -> str:
    """One kernel `name` (its file `<name>.py`) against REF on a shape set per size."""
    return "version: 1\nkernels:\n" + entry(name, sizes=sizes)
