import torch

from gpulib.runtime import SM_COUNT


def scaled_relu(x):
    return torch.relu(x) * 2.0 + 0.0 * SM_COUNT
