import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, alpha=2, out=out)
    return out.clamp_(min=0)
