"""The workloads of examples/kforge.yaml: tinylm with the bundled Triton kernels (`prefill`, `decode`)."""

from __future__ import annotations

from tinylm import ops_triton
from tinylm.model import build, decode, prefill  # noqa: F401  (the workloads' entries)


def make_inputs(*, seed: int, device: str, **args: object) -> tuple:
    return build(ops_triton, seed=seed, device=device, **args)
