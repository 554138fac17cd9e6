"""A cheap kernel (x * 2, in torch) for the evaluation pool's tests, and candidates that misbehave: one that
segfaults, one that hangs, one that kills the slot process that runs it, one correct only on a pinned device."""

from __future__ import annotations

from pathlib import Path

from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec, load_spec

KERNEL = '''"""x * 2, in torch: a kernel whose candidates are cheap to evaluate."""
import torch


def double(x):
    return x * 2.0


def reference(x):
    return x + x


def make_inputs(n):
    return [torch.randn(n)]
'''

MANIFEST = """version: 1
kernels:
  double:
    file: double.py
    entry: double
    reference: double.py:reference
    inputs: double.py:make_inputs
    shapes:
      - {n: 4096}
    targets: [cpu]
    seeds: 2
"""

# Correct only when the child sees the slot's device pinned: proves the visibility variable reaches it.
PINNED = KERNEL.replace("    return x * 2.0\n", "    import os\n    seen = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
                        "    return x * (2.0 if seen in ('5', '6') else 3.0)\n", 1)
SEGFAULT = KERNEL.replace("    return x * 2.0\n", "    import ctypes\n    ctypes.string_at(0)\n    return x * 2.0\n", 1)
HANG = KERNEL.replace("    return x * 2.0\n", "    import time\n    time.sleep(600)\n    return x * 2.0\n", 1)
# Kills the slot process that started this evaluation (its parent), as a hostile candidate could.
KILL_SLOT = KERNEL.replace("    return x * 2.0\n", "    import ctypes, os, time\n"
                           "    ctypes.CDLL(None)['ki' + 'll'](os.getppid(), 9)\n    time.sleep(600)\n"
                           "    return x * 2.0\n", 1)
SETTINGS = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=12)



def spec_in(folder: Path, source: str = KERNEL) -> KernelSpec:
    """The `double` kernel (or `source` as double.py) with its manifest in `folder`, loaded."""
    (folder / "double.py").write_text(source)
    (folder / "kforge.yaml").write_text(MANIFEST)
    return load_spec(folder / "kforge.yaml")


def variant(spec: KernelSpec, source: str, tag: str) -> Implementation:
    """A distinct source per job (a comment), so no two jobs are the same candidate."""
    return spec.candidate_from_source(source + f"# {tag}\n")
