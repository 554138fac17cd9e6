"""Kernels for the harness-resolution benchmark: a memory-bound row sum whose cost is easy to dial.

Every version sums all rows, then sums the first `EXTRA` fraction of rows again (discarded), so baseline
and candidates launch the same kernels and differ only in bytes read: the baseline uses EXTRA = 0.1 and a
candidate doing p more work uses EXTRA = 1.1 * (1 + p) - 1. The output is tiny, so checking it costs
nothing and the benchmark measures the timing.
"""

from __future__ import annotations

import torch

EXTRA = 0.1


def rowsum(x: torch.Tensor) -> torch.Tensor:
    out = x.sum(dim=1)
    extra_rows = int(round(x.shape[0] * EXTRA))
    _ = x[:extra_rows].sum(dim=1)  # the extra work: read `EXTRA` more of the input
    return out


def make_inputs(rows: int, cols: int) -> tuple[torch.Tensor]:
    return (torch.randn(rows, cols, dtype=torch.float32),)
