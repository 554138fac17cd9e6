"""A candidate that looks for credentials in its environment (and fails loudly if it finds any)."""

import os

import torch
import torch.nn as nn

LEAKED = sorted(name for name in os.environ
                if "TOKEN" in name or "KEY" in name or name.startswith(("GITHUB_", "OPENAI_")))
if LEAKED:
    raise RuntimeError(f"credentials visible to the candidate: {', '.join(LEAKED)}")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True)
