"""out = 3 x; its check_implementation only checks the shape and dtype (the harness's own comparison must not
trust it)."""

import torch
from task import input_t, output_t


def ref_kernel(data: input_t) -> output_t:
    return data * 3


def generate_input(n: int, seed: int) -> input_t:
    gen = torch.Generator()
    gen.manual_seed(seed)
    return torch.randn(n, 16, generator=gen)


def check_implementation(data: input_t, output: output_t):
    if output.shape != data.shape or output.dtype != data.dtype:
        return False, "wrong shape or dtype"
    return True, ""
