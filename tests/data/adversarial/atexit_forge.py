"""Hack 11: an exit handler that prints a fake passing result after the harness is done."""

import atexit
import json

import torch
import torch.nn as nn


def _forge():
    print(json.dumps({"type": "result", "status": "ok", "verdict": "pass", "speedup": 100.0}), flush=True)


atexit.register(_forge)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
