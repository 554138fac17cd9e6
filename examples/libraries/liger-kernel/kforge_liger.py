"""References and inputs for Liger-Kernel's kforge.liger.yaml: plain torch, written for kforge-bot from the
published formulas (Llama's RMSNorm, Hugging Face's rotate-half RoPE, SiLU and tanh-GELU gating). Goes to the
library's root beside the manifest."""

import math

import torch


def _dtype(name):
    return getattr(torch, name)


# ------------------------------------------------------------------------------------------ RMSNorm


def rms_norm(X, W, eps=1e-6, offset=0.0, casting_mode="llama", row_mode=None):
    """Llama's RMSNorm: normalised in fp32, cast back, then scaled (Liger's "llama" casting mode)."""
    x = X.float()
    normed = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).to(X.dtype)
    return normed * (offset + W)


def rms_norm_with_grad(X, W, eps=1e-6, offset=0.0, *_settings):
    """The same in fp32 throughout, so its gradients are the accurate ones (the rest of the launcher's or the
    autograd.Function's arguments say how Liger computes it, which this does not need)."""
    x, w = X.float(), W.float()
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * (offset + w)).to(X.dtype)


def rms_norm_inputs(rows, cols, dtype="bfloat16"):
    return (torch.randn(rows, cols, dtype=_dtype(dtype)), torch.rand(cols, dtype=_dtype(dtype)) + 0.5, 1e-6, 0.0,
            "llama", None)


def rms_norm_autograd_inputs(rows, cols, dtype="bfloat16"):
    X, W, eps, offset, mode, row_mode = rms_norm_inputs(rows, cols, dtype)
    return X, W, eps, offset, mode, True, row_mode


# --------------------------------------------------------------------------------------------- RoPE


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(q, k, cos, sin):
    """Hugging Face's apply_rotary_pos_emb (unsqueeze_dim=1), out of place: the rotated q and k."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def rope_inputs(batch, seq, heads, kv_heads, dim, dtype="bfloat16"):
    """q and k as a model has them: (batch, heads, seq, dim) views of (batch, seq, heads, dim) memory, which is
    what Liger's launcher rotates in place."""
    q = torch.randn(batch, seq, heads, dim, dtype=_dtype(dtype)).transpose(1, 2)
    k = torch.randn(batch, seq, kv_heads, dim, dtype=_dtype(dtype)).transpose(1, 2)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freqs = torch.outer(torch.arange(seq, dtype=torch.float32) + torch.rand(1) * 64, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return q, k, emb.cos()[None].to(_dtype(dtype)), emb.sin()[None].to(_dtype(dtype))


# ------------------------------------------------------------------------------------- gated MLPs


def swiglu(a, b, gate_multiplier=1.0, down_multiplier=1.0):
    return (torch.nn.functional.silu(a.float() * gate_multiplier) * b.float() * down_multiplier).to(a.dtype)


def geglu(a, b):
    x = a.float()
    gelu = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3))))
    return (gelu * b.float()).to(a.dtype)


def swiglu_inputs(rows, cols, dtype="bfloat16"):
    return torch.randn(rows, cols, dtype=_dtype(dtype)), torch.randn(rows, cols, dtype=_dtype(dtype))


# ------------------------------------------------------------------------------------------ cross-entropy


def cross_entropy(_input, target, weight=None, *_settings):
    """Mean cross-entropy over the rows, computed in fp32 (the rest of the autograd.Function's arguments are Liger's
    options at their defaults)."""
    return torch.nn.functional.cross_entropy(_input.float(), target, weight=weight)


def cross_entropy_inputs(rows, vocab, dtype="float32"):
    return torch.randn(rows, vocab, dtype=_dtype(dtype)), torch.randint(vocab, (rows,)), None
