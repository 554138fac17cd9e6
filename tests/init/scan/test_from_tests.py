"""References, inputs and sizes read from a library's own tests (kforge_bot.init.scan.from_tests)."""

from __future__ import annotations

from kforge_bot.init.scan.from_tests import read_tests
from kforge_bot.init.scan.launchers import CallGraph
from kforge_bot.init.scan.modules import Library, parse_module

LIB = "import triton\n@triton.jit\ndef _k(x): pass\ndef op(x, w, eps=1e-6):\n    _k[(1,)](x)\n    return x\n"


def _evidence(test: str):
    library = Library(m for m in (parse_module(r, t) for r, t in {"lib/ops.py": LIB, "tests/test_ops.py": test}.items())
                      if m is not None)
    launchers, _ = CallGraph.build(library).launchers()
    return read_tests(library, launchers).get(("lib/ops.py", "op"))


def test_an_expected_expression_and_parametrize_sizes() -> None:
    ev = _evidence(
        "import pytest\nimport torch\nfrom lib.ops import op\n"
        "@pytest.mark.parametrize('m, n', [(2, 1 << 10), pytest.param(4, 64, marks=pytest.mark.slow)])\n"
        "@pytest.mark.parametrize('dtype', [torch.float16])\n"
        "def test_op(m, n, dtype):\n"
        "    x = torch.randn(m, n, dtype=dtype, device='cuda')\n"
        "    x2 = x.clone().requires_grad_(True)\n"
        "    w = torch.ones(n, device='cuda')\n"
        "    y = op(x2, w, eps=1e-5)\n"
        "    ref = x * w\n"
        "    torch.testing.assert_close(y, ref)\n")
    assert ev is not None and ev.test == "tests/test_ops.py::test_op"
    assert ev.reference_params == ["x2", "w", "eps"] and ev.reference_code == "return x2 * w"
    assert ev.inputs_params == ["m", "n", "dtype"] and ev.dtype_params == ["dtype"]
    assert ev.shapes == [{"m": 2, "n": 1024, "dtype": "float16"}, {"m": 4, "n": 64, "dtype": "float16"}]
    assert ev.inputs_code[-1] == "return (x2, w, 1e-05)" and ev.output_index is None
    assert not any("cuda" in line for line in ev.inputs_code)  # inputs are made on the target device


def test_a_comparison_with_the_library_itself_or_a_fixture_gives_no_reference() -> None:
    ev = _evidence(
        "import torch\nfrom lib.ops import op\n"
        "def test_deterministic(x, w):\n"
        "    a = op(x, w)\n"
        "    torch.testing.assert_close(a, op(x, w))\n")
    assert ev is not None and ev.reference_code is None and ev.reference_symbol is None
    assert ev.inputs_code is None and any("fixture" in n for n in ev.notes)


def test_a_reference_function_of_the_test_module_is_named_as_it_is() -> None:
    ev = _evidence(
        "import torch\nimport pytest\nfrom lib.ops import op\n"
        "def torch_op(x, w):\n    return x * w\n"
        "@pytest.mark.parametrize('n', [8])\n"
        "def test_op(n):\n    x = torch.randn(n)\n    w = torch.randn(n)\n    assert torch.allclose(op(x, w), torch_op(x, w))\n")
    assert ev is not None and ev.reference_symbol == "torch_op" and ev.shapes == [{"n": 8}]


def test_which_output_a_test_compares() -> None:
    for binding, compared, index in (("_, y = op(x, w)", "y", 1), ("y = op(x, w)[0]", "y", 0),
                                     ("y = op(x, w)", "y", None), ("", "op(x, w)[1]", 1)):
        ev = _evidence(
            "import torch\nfrom lib.ops import op\n"
            f"def test_op():\n    x = torch.randn(4)\n    w = torch.randn(4)\n    {binding or 'pass'}\n"
            f"    torch.testing.assert_close({compared}, x * w)\n")
        assert ev is not None and ev.reference_code == "return x * w" and ev.output_index == index, binding
