"""Plain PyTorch references and inputs for tests/data/library_keywords."""

import torch


def one_tensor(n):
    return (torch.randn(n),)


def two_tensors(n):
    return torch.randn(n), torch.randn(n)


def gelu(x, approximate="none"):
    return torch.nn.functional.gelu(x, approximate=approximate)


def scaled_add(x, y, *, alpha=1.0, dtype=torch.float32):
    return (x + alpha * y).to(dtype)


def softplus(x, beta=1.0):
    return torch.nn.functional.softplus(x, beta=beta)


def rotate(q, k):
    return q * 2.0, k + 1.0


def mul(a, b):
    return a * b


def cube_sum(x):
    return x.pow(3).sum() / 3
