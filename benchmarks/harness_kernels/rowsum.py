"""Kernels for the harness-resolution benchmark: a memory-bound row sum whose cost is easy to dial.

`EXTRA` is the fraction of extra rows summed (and discarded): a candidate doing 1% more work reads 1%
more bytes. The output is tiny, so checking it costs nothing and the benchmark measures the timing.
"""

from __future__ import annotations

import torch

EXTRA = 0.0


def rowsum(x: torch.Tensor) -> torch.Tensor:
    out = x.sum(dim=1)
    extra_rows = int(round(x.shape[0] * EXTRA))
    if extra_rows:
        _ = x[:extra_rows].sum(dim=1)  # the extra work: read `EXTRA` more of the input
    return out


def make_inputs(rows: int, cols: int) -> tuple[torch.Tensor]:
    return (torch.randn(rows, cols, dtype=torch.float32),)
