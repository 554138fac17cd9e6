"""The oracles and input makers: plain torch, written apart from the library."""

import torch


def rms_norm(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_norm_inputs(rows, cols):
    return torch.randn(rows, cols), torch.rand(cols) + 0.5


def rope(q, k, cos, sin):
    """Out of place: the rotated q and k (the kernel writes them into its inputs)."""
    def rotate(t):
        half = t.shape[-1] // 2
        a, b = t[..., :half], t[..., half:]
        return torch.cat([a * cos[..., :half] - b * sin[..., :half], b * cos[..., half:] + a * sin[..., half:]], -1)
    return rotate(q), rotate(k)


def rope_inputs(heads, seq, dim):
    angles = torch.rand(seq, dim) * 6.28
    return torch.randn(1, heads, seq, dim), torch.randn(1, heads, seq, dim), angles.cos(), angles.sin()


def swiglu(a, b):
    return torch.nn.functional.silu(a) * b


def swiglu_inputs(rows, cols):
    return torch.randn(rows, cols), torch.randn(rows, cols)
