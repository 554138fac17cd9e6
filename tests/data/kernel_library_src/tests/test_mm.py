import pytest
import torch

from srclib import mm


@pytest.mark.parametrize("m, n", [(2, 8), (4, 16), (4096, 4096), (2048, 8192), (64, 64), (1024, 1024)])
def test_mm(m, n):
    a = torch.randn(m, n, device="cuda")
    b = torch.randn(n, m, device="cuda")
    torch.testing.assert_close(mm(a, b), a @ b)
