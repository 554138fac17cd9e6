"""Tiny CPU kernels in real git repositories, for the gate's tests: a reference, kernels that compute the
same, a helper a kernel imports, a KernelBench problem, a manifest and a policy, and the CLI run in a child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fakes.gitrepos import git, write
from kforge_bot.spec import KernelSpec, load_spec

PACKAGE_ROOT = Path(__file__).resolve().parents[2]

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
evaluation: {seeds: 2, time_budget_s: 1.0, timeout_s: 120}
"""


def manifest(names: list[str], n: int = 128) -> str:
    lines = ["version: 1", "kernels:"]
    for name in names:
        lines += [f"  {name}:", f"    file: {name}.py", "    entry: kernel", "    reference: ref.py:reference",
                  "    inputs: ref.py:make_inputs", f"    shapes: [{{n: {n}}}]", "    targets: [cpu]"]
    return "\n".join(lines) + "\n"


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), full.get("PYTHONPATH", "")) if p)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "kforge_bot.cli", *args], cwd=cwd, env=full, check=False, capture_output=True,
                          text=True, timeout=timeout)


def init_repo(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")



def tiny_spec_in(folder: Path) -> KernelSpec:
    """One manifest kernel `k` (PLAIN against REF) in `folder`, loaded."""
    write(folder, "ref.py", REF)
    write(folder, "k.py", PLAIN)
    write(folder, "kforge.yaml", manifest(["k"]))
    return load_spec(folder / "kforge.yaml")
