"""The library's own tests: each launcher beside the PyTorch it must match."""

import pytest
import torch

from mylib.ops.fused import fused_add_mul
from mylib.ops.rms_norm import rms_norm_forward
from mylib.ops.scale import scale
from mylib.ops.softmax import softmax

DEVICE = "cuda"
SIZES = [(4, 128), (16, 1000)]


def torch_fused(x, y, scale):
    return (x + y) ** 2 * scale


@pytest.mark.parametrize("rows, cols", [(2, 64), (8, 4096)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm(rows, cols, dtype):
    x = torch.randn(rows, cols, dtype=dtype, device=DEVICE)
    w = torch.rand(cols, dtype=dtype, device=DEVICE)
    eps = 1e-6
    y, _, _, _ = rms_norm_forward(x, w, eps)
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    torch.testing.assert_close(y, expected, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("n", [1000, 1 << 20])
def test_fused_add_mul(n):
    x = torch.randn(n, device=DEVICE)
    y = torch.randn(n, device=DEVICE)
    assert torch.allclose(fused_add_mul(x, y, 0.5), torch_fused(x, y, 0.5))


@pytest.mark.parametrize("n", [17, 4096])
def test_scale(n):
    x = torch.randn(n).cuda()
    torch.testing.assert_close(scale(x, alpha=3.0), x * 3.0)


@pytest.mark.parametrize("rows, cols", SIZES)
def test_softmax(rows, cols, tmp_path):
    x = torch.randn(rows, cols, device=DEVICE)
    out = softmax(x)
    torch.testing.assert_close(out, torch.softmax(x, dim=-1))
