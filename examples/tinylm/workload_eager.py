"""tinylm with the eager PyTorch kernels (`prefill`, `decode`): the CPU's workloads, and the Triton ones' baseline."""

from __future__ import annotations

from tinylm import ops_eager
from tinylm.model import build, decode, prefill  # noqa: F401  (the workloads' entries)


def make_inputs(*, seed: int, device: str, **args: object) -> tuple:
    return build(ops_eager, seed=seed, device=device, **args)
