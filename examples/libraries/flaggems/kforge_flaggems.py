"""PyTorch references and input makers for examples/libraries/flaggems/kforge.flaggems.yaml (FlagGems' own ops,
checked against torch's). Inputs are bfloat16, made on the device the harness chooses."""

import torch

DTYPE = torch.bfloat16


def one(rows, cols):
    return (torch.randn(rows, cols, dtype=DTYPE),)


def two(rows, cols):
    return torch.randn(rows, cols, dtype=DTYPE), torch.randn(rows, cols, dtype=DTYPE)


def one_and_dim(rows, cols):
    return torch.randn(rows, cols, dtype=DTYPE), -1


def norm_inputs(rows, cols):
    return (torch.randn(rows, cols, dtype=DTYPE), [cols], torch.randn(cols, dtype=DTYPE),
            torch.randn(cols, dtype=DTYPE), 1e-5)


def rms_inputs(rows, cols):
    return torch.randn(rows, cols, dtype=DTYPE), [cols], torch.randn(cols, dtype=DTYPE), 1e-6


def mm_inputs(m, n, k):
    return torch.randn(m, k, dtype=DTYPE), torch.randn(k, n, dtype=DTYPE)


def add(a, b, *, alpha=1):
    return a + alpha * b


def gelu(x, *, approximate="none"):
    return torch.nn.functional.gelu(x.float(), approximate=approximate).to(x.dtype)


def relu(x):
    return torch.relu(x)


def total(x, *, dtype=None):
    return torch.sum(x, dtype=dtype)


def mean(x):
    return torch.mean(x.float()).to(x.dtype)


def softmax(x, dim):
    return torch.softmax(x.float(), dim).to(x.dtype)


def layer_norm(x, shape, weight, bias, eps):
    return torch.nn.functional.layer_norm(x.float(), shape, weight.float(), bias.float(), eps).to(x.dtype)


def rms_norm(x, shape, weight, eps):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def mm(a, b):
    return a @ b
