"""Activations whose launchers take keyword-only arguments (torch stand-ins for Triton kernels)."""

import torch


def gelu(x, *, approximate="none"):
    return torch.nn.functional.gelu(x, approximate=approximate)


def scaled_add(x, y, *, alpha=1.0, dtype=torch.float32):
    return (x + alpha * y).to(dtype)


class SoftplusFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta=1.0):
        ctx.save_for_backward(x)
        ctx.beta = beta
        return torch.nn.functional.softplus(x, beta=beta)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        # A gradient computed in float16: within the backward's own tolerance, not the forward's.
        return (grad * torch.sigmoid(ctx.beta * x)).half().float(), None
