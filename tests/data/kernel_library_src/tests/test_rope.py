import pytest
import torch
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from srclib import rope


def reference_rope(q, k, cos, sin):
    return apply_rotary_pos_emb(q, k, cos, sin)


@pytest.mark.parametrize("n", [128, 4096])
def test_rope(n):
    q = torch.randn(n, device="cuda")
    k = torch.randn(n, device="cuda")
    cos = torch.randn(n, device="cuda")
    sin = torch.randn(n, device="cuda")
    torch.testing.assert_close(rope(q, k, cos, sin), reference_rope(q, k, cos, sin))
