"""Honest: a fresh output tensor (the output buffer in data left alone)."""

import torch


def custom_kernel(data):
    a, b, _ = data
    return torch.clamp(b * 2 + a, min=0)
