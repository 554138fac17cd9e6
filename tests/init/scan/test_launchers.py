"""Triton kernels and the public launchers that reach them (kforge_bot.init.scan.launchers)."""

from __future__ import annotations

from kforge_bot.init.scan.launchers import CallGraph, find_kernels
from kforge_bot.init.scan.modules import Library, parse_module


def _graph(files: dict[str, str]) -> CallGraph:
    return CallGraph.build(Library(m for m in (parse_module(r, t) for r, t in files.items()) if m is not None))


def test_kernels_by_decorator_wrapper_and_imported_name() -> None:
    module = parse_module("k.py", (
        "import triton\nfrom triton import jit\nimport triton.language as tl\n"
        "@triton.autotune(configs=[], key=[])\n@triton.jit\ndef a(x): pass\n"
        "@jit\ndef b(x): pass\n"
        "@triton.jit(do_not_specialize=['n'])\ndef c(x, n): pass\n"
        "def _d(x): pass\n"
        "d = triton.jit(_d)\n"
        "@functools.cache\ndef not_a_kernel(x): pass\n"
        "jit2 = something.jit(_d)\n"))
    assert module is not None
    kernels = find_kernels(module)
    assert sorted(kernels) == ["a", "b", "c", "d"]
    assert kernels["a"].autotuned and not kernels["b"].autotuned and kernels["d"].wraps == "_d"


def test_the_nearest_public_launcher_through_private_code_and_autograd_functions() -> None:
    graph = _graph({
        "lib/kernels.py": "import triton\n@triton.jit\ndef _k(x): _dev(x)\n@triton.jit\ndef _dev(x): pass\n",
        "lib/utils.py": "def get_num_warps(n):\n    return 4\n",
        "lib/ops.py": ("import torch\nfrom lib.kernels import _k\nfrom lib.utils import get_num_warps\n"
                       "def _launch(x):\n    _k[(1,)](x, num_warps=get_num_warps(1))\n"
                       "class _Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
                       "        return _launch(x)\n"
                       "def op(x):\n    return _Fn.apply(x)\n"
                       "def op_twice(x):\n    return op(op(x))\n"),
        "tests/test_ops.py": "from lib.ops import _launch\ndef test_it():\n    _launch(1)\n",
        "benchmarks/bench.py": "from lib.kernels import _k\ndef run():\n    _k[(1,)](1)\n",
    })
    launchers, orphans = graph.launchers()
    assert [(la.module.rel, la.symbol, [k.name for k in la.kernels]) for la in launchers] == [
        ("lib/ops.py", "op", ["_k"])]  # not op_twice (op is nearer), not the helper, the test or the benchmark
    assert not graph.launched(("lib/kernels.py", "_dev"))  # a device function: only a kernel calls it
    assert orphans == {}


def test_a_kernel_only_private_code_launches_is_an_orphan() -> None:
    graph = _graph({"lib/k.py": "import triton\n@triton.jit\ndef _k(x): pass\ndef _run(x):\n    _k[(1,)](x)\n"})
    launchers, orphans = graph.launchers()
    assert launchers == [] and orphans == {("lib/k.py", "_k"): [("lib/k.py", "_run")]}
