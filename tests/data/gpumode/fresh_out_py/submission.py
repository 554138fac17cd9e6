"""Honest: the product written into data's output buffer c, and c returned."""

import torch


def custom_kernel(data):
    a, b, c = data
    torch.matmul(a, b, out=c)
    return c
