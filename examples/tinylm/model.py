"""A decoder-only transformer (pre-norm, multi-head attention with a KV cache, SwiGLU MLP) whose RMSNorm, SwiGLU
and softmax are the `ops` module's: `ops.rmsnorm(x, w)`, `ops.swiglu(a, b)` and `ops.softmax(x)`, each on
[rows, cols] tensors. Weights are random from a seed: nothing is downloaded.

Sizes: `tiny` (a few hundred thousand parameters, float32, for CPU tests) and `small` (about 375 million
parameters, meant for bfloat16 on a GPU)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType

import torch


@dataclass(frozen=True)
class Config:
    vocab: int
    dim: int
    layers: int
    heads: int
    ffn: int
    max_seq: int


SIZES = {
    "tiny": Config(vocab=512, dim=64, layers=2, heads=4, ffn=192, max_seq=256),
    "small": Config(vocab=32000, dim=1024, layers=24, heads=16, ffn=2816, max_seq=2048),
}


class TinyLM:
    def __init__(self, ops: ModuleType, config: Config, seed: int, device: str, dtype: torch.dtype) -> None:
        self.ops, self.config = ops, config
        gen = torch.Generator(device=device).manual_seed(seed)

        def weight(*shape: int, scale: float) -> torch.Tensor:
            return (torch.randn(*shape, generator=gen, device=device) * scale).to(dtype)

        def norm() -> torch.Tensor:
            return (1.0 + 0.1 * torch.randn(config.dim, generator=gen, device=device)).to(dtype)

        d = config.dim
        # Attention's output projection at twice the usual scale: what a token attends to then shows in the next
        # token (at 1x the tiny model's greedy tokens barely depend on attention).
        self.embed = weight(config.vocab, d, scale=1.0)
        self.pos = weight(config.max_seq, d, scale=0.1)
        self.blocks = [{"ln1": norm(), "qkv": weight(d, 3 * d, scale=d ** -0.5),
                        "out": weight(d, d, scale=2 * d ** -0.5),
                        "ln2": norm(), "w1": weight(d, config.ffn, scale=d ** -0.5),
                        "w3": weight(d, config.ffn, scale=d ** -0.5),
                        "w2": weight(config.ffn, d, scale=config.ffn ** -0.5)} for _ in range(config.layers)]
        self.ln_f = norm()
        self.head = weight(d, config.vocab, scale=d ** -0.5)

    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return self.ops.rmsnorm(x.reshape(-1, x.shape[-1]).contiguous(), w).view(x.shape)

    def forward(self, ids: torch.Tensor, cache: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
                start: int = 0) -> torch.Tensor:
        """The last position's logits (float32) for `ids` [batch, seq] at positions start.., appending to `cache`."""
        c = self.config
        batch, seq = ids.shape
        hd = c.dim // c.heads
        x = self.embed[ids] + self.pos[start:start + seq]
        for i, blk in enumerate(self.blocks):
            h = self._norm(x, blk["ln1"])
            q, k, v = (h @ blk["qkv"]).view(batch, seq, 3, c.heads, hd).permute(2, 0, 3, 1, 4)
            if cache is not None:
                if len(cache) > i:
                    k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
                    cache[i] = (k, v)
                else:
                    cache.append((k, v))
            total = k.shape[2]
            scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
            if seq > 1:
                mask = torch.ones(seq, total, dtype=torch.bool, device=ids.device).tril(total - seq)
                scores = scores.masked_fill(~mask, float("-inf"))
            probs = self.ops.softmax(scores.reshape(-1, total).contiguous()).view(scores.shape)
            attn = (probs @ v).transpose(1, 2).reshape(batch, seq, c.dim)
            x = x + attn @ blk["out"]
            h = self._norm(x, blk["ln2"]).reshape(-1, c.dim)
            x = x + (self.ops.swiglu(h @ blk["w1"], h @ blk["w3"]) @ blk["w2"]).view(batch, seq, c.dim)
        return (self._norm(x[:, -1:], self.ln_f)[:, 0] @ self.head).float()


def build(ops: ModuleType, *, seed: int, device: str, size: str = "tiny", batch: int = 1, prompt: int = 16,
          new_tokens: int = 0, dtype: str = "float32") -> tuple:
    """The model and a random prompt from `seed` (and the number of tokens to generate, for `decode`)."""
    config = SIZES[size]
    model = TinyLM(ops, config, seed, device, getattr(torch, dtype))
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    ids = torch.randint(0, config.vocab, (batch, prompt), generator=gen).to(device)
    return (model, ids, new_tokens) if new_tokens else (model, ids)


@torch.inference_mode()
def prefill(model: TinyLM, ids: torch.Tensor) -> torch.Tensor:
    """One forward over the prompt: the last position's logits [batch, vocab]."""
    return model.forward(ids)


@torch.inference_mode()
def decode(model: TinyLM, ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding with a KV cache: the prompt's prefill, then one token at a time; the tokens [batch, new]."""
    cache: list[tuple[torch.Tensor, torch.Tensor]] = []
    logits = model.forward(ids, cache)
    out = []
    position = ids.shape[1]
    for _ in range(new_tokens):
        token = logits.argmax(-1, keepdim=True)
        out.append(token)
        logits = model.forward(token, cache, start=position)
        position += 1
    return torch.cat(out, 1)
