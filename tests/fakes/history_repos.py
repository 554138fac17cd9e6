"""A scripted history for the performance-history tests: a real git repository whose one CPU kernel does a chosen
amount of redundant torch work per commit (its reference a fixed amount), with per-call random extra work, so its
time relative to the reference steps where the script says and is noisy everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fakes.gitrepos import commit_all, git, write

REFERENCE = """\
import torch

WORK = 400


def reference(x, y):
    for _ in range(WORK):  # redundant work: the kernel's cost is measured against this
        torch.mul(x, 2.0)
    return x * 2.0 + y


def make_inputs(n):
    return torch.randn(n, n), torch.randn(n, n)
"""


def kernel_source(reps: int) -> str:
    """The kernel at one commit: `reps` units of redundant work plus up to 10% more at random on every call."""
    return f"""\
import random

import torch

REPS = {reps}


def kernel(x, y):
    for _ in range(REPS + random.randrange(REPS // 10 + 1)):
        torch.mul(x, 2.0)
    return x * 2.0 + y
"""


MANIFEST = """\
version: 1
kernels:
  noisy:
    file: noisy.py
    entry: kernel
    reference: ref.py:reference
    inputs: ref.py:make_inputs
    shapes: [{n: 64}]
    targets: [cpu]
"""
POLICY = """\
version: 1
gate: {threshold: {cpu: 0.03}, confidence: 0.95}
evaluation: {seeds: 1, timing_budget_s: 1.5, timeout_s: 120}
"""


def scripted_history(root: Path, reps: Sequence[int]) -> list[str]:
    """A repository at `root` with one commit per entry of `reps` (the kernel's work at that commit; a commit that
    keeps the work touches a notes file instead). Its commits' shas, oldest first."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    shas = []
    for i, r in enumerate(reps):
        if i == 0:
            write(root, "ref.py", REFERENCE)
            write(root, "kforge.yaml", MANIFEST)
            write(root, "policy.yml", POLICY)
        write(root, "noisy.py", kernel_source(r))
        write(root, "NOTES.md", f"commit {i}\n")
        shas.append(commit_all(root, f"commit {i}: work {r}" if i == 0 or reps[i - 1] != r else f"commit {i}: notes"))
    return shas
