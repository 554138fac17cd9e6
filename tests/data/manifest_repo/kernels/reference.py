"""The correctness oracle for rmsnorm: the textbook formula."""

import torch


def rmsnorm_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight
