import torch


def rope_forward(q, k, cos, sin):
    """Rotates q and k in place, as fused RoPE kernels do; returns views of them, and cos and sin."""
    for t in (q, k):
        half = t.shape[-1] // 2
        a, b = t[..., :half].clone(), t[..., half:].clone()
        t[..., :half] = a * cos[..., :half] - b * sin[..., :half]
        t[..., half:] = b * cos[..., half:] + a * sin[..., half:]
    return q.transpose(1, 2), k.transpose(1, 2), cos, sin
