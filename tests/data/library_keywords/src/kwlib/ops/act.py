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


class RotateFunction(torch.autograd.Function):
    """Writes q and k in place (as RoPE kernels do in the model's layout) and returns views of them."""

    @staticmethod
    def forward(ctx, q, k):
        q.mul_(2.0)
        k.add_(1.0)
        return q.view(q.shape), k.view(k.shape)

    @staticmethod
    def backward(ctx, dq, dk):
        return dq * 2.0, dk
