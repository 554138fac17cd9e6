"""Plain PyTorch references and inputs for tests/data/library_needs_gpu."""

import torch


def one_tensor(n):
    return (torch.randn(n),)


def scaled_relu(x):
    return torch.relu(x) * 2.0
