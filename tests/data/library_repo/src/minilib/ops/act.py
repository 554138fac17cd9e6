import torch


def silu_mul(a, b):
    return torch.nn.functional.silu(a) * b
