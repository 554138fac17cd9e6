"""GPU MODE's documented bypass: patch the trusted check living in the same interpreter (here the helper the
problem's check_implementation compares with, reached through the reference module the harness imported), then
return a wrong answer (relu(a + b), not relu(a + 2b)). Raises at import when it finds no such module."""

import sys

import torch

_patched = 0
for _module in list(sys.modules.values()):
    if "check_implementation" in vars(_module) and "make_match_reference" in vars(_module):
        vars(_module)["make_match_reference"].__globals__["close_enough"] = lambda *args, **kwargs: []
        _patched += 1
if not _patched:
    raise RuntimeError("no reference module in sys.modules to patch")


def custom_kernel(data):
    a, b, out = data
    out[...] = torch.relu(a + b)
    return out
