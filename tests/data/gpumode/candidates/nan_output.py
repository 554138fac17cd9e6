"""NaN everywhere: an upstream check that reports the maximum error as nan must not read as a pass."""

import torch


def custom_kernel(data):
    a, _, out = data
    return out.fill_(float("nan"))
