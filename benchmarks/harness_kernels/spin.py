"""A ~20 us CUDA kernel whose duration is exactly dialable, for the harness-resolution benchmark.

A memory-bound kernel this short is latency-bound: reading 10% more bytes costs far less than 10% more time,
so it cannot show how finely the harness resolves a short kernel. A spinning kernel can: a candidate doing
p more work spins CYCLES * (1 + p). A small sum follows so the output depends on the input.
"""

from __future__ import annotations

import torch

CYCLES = 40000  # about 20 us at the H200's 1.98 GHz


def spin(x: torch.Tensor) -> torch.Tensor:
    torch.cuda._sleep(CYCLES)
    return x.sum(dim=1)


def make_inputs(rows: int, cols: int) -> tuple[torch.Tensor]:
    return (torch.randn(rows, cols, dtype=torch.float32),)
