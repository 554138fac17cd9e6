"""A softmax that fails unless its worker runs torch and OpenMP on the policy's one thread (evaluation.cpu_threads)."""

import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seen = (torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"))
        if seen != (1, "1"):
            raise RuntimeError(f"threads {seen}, not (1, '1')")
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True)
