"""A kernel's tunable parameters (kforge_bot.tuner.tunables): found in real-looking kernels, rewritten exactly."""

from __future__ import annotations

import ast
import difflib
import shutil
import subprocess
from pathlib import Path

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.tuner.tunables import UNPINNED, Tunable, apply, candidates_for, current_assignment, find_tunables

DATA = Path(__file__).parents[1] / "data_agents"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def source(name: str) -> str:
    return (DATA / name).read_text()


def by_name(tunables: list[Tunable]) -> dict[str, Tunable]:
    return {t.name: t for t in tunables}


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    """(old line, new line) pairs of a rewrite; the rewrite never adds or removes lines."""
    a, b = before.splitlines(), after.splitlines()
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b) if x != y]


# --- finding ------------------------------------------------------------------------------------------


def test_triton_softmax_constants_locals_and_marker():
    t = by_name(find_tunables(source("triton_softmax.py"), "triton"))
    assert set(t) == {"NUM_WARPS", "ROWS_PER_PROGRAM", "num_stages"}  # BLOCK_SIZE is computed: not a literal
    assert t["NUM_WARPS"].origin == "constant" and t["NUM_WARPS"].current == 4
    assert t["NUM_WARPS"].marked and t["NUM_WARPS"].candidates == (2, 4, 8, 16)  # the marker's list
    assert t["num_stages"].origin == "local" and t["num_stages"].candidates == (1, 2, 3, 4, 5, 6)
    assert t["num_stages"].line == 25


def test_problem_sizes_and_floats_are_not_tunable():
    src = "N = 4096\nM = 128\nEPS = 1e-6\nSCALE = 2\nDEBUG = True\nBLOCK = 256.0\n"
    assert find_tunables(src, "triton") == []


def test_triton_autotune_configs():
    t = by_name(find_tunables(source("triton_matmul_autotune.py"), "triton"))
    assert sorted(t) == sorted(
        f"autotune[{i}].{k}" for i in (0, 1) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")
    )
    assert t["autotune[0].BLOCK_N"].current == 256 and t["autotune[0].BLOCK_N"].kind == "tile"
    assert max(t["autotune[0].BLOCK_N"].candidates) == 256  # matmul tile sides are capped at 256
    assert t["autotune[1].num_stages"].current == 4 and t["autotune[1].num_warps"].current == 4
    assert t["autotune[0].GROUP_M"].candidates == (1, 2, 4, 8, 16)


def test_triton_launch_keywords():
    src = (
        "import triton\n\n"
        "def add(x, y, out, n):\n"
        "    grid = (triton.cdiv(n, 1024),)\n"
        "    _add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024, num_warps=4, num_stages=1)\n"
        "    helper(n, BLOCK_SIZE=64)  # not a launch: left alone\n"
    )
    t = by_name(find_tunables(src, "triton"))
    assert set(t) == {"BLOCK_SIZE", "num_warps", "num_stages"}
    assert t["BLOCK_SIZE"].origin == "keyword" and t["BLOCK_SIZE"].current == 1024
    assert t["BLOCK_SIZE"].candidates == (128, 256, 512, 1024, 2048, 4096)  # +-3 octaves, capped at 4096


def test_same_keyword_in_two_launches_gets_line_suffixes():
    src = (
        "def f(x):\n"
        "    k1[(1,)](x, num_warps=4)\n"
        "    k2[(1,)](x, num_warps=8)\n"
    )
    t = by_name(find_tunables(src, "triton"))
    assert set(t) == {"num_warps@2", "num_warps@3"}
    out = apply(src, {"num_warps@3": 16})
    assert changed_lines(src, out) == [("    k2[(1,)](x, num_warps=8)", "    k2[(1,)](x, num_warps=16)")]


def test_reassigned_locals_are_not_tunable():
    src = (
        "def launch(x, BLOCK):\n"
        "    num_warps = 4\n"
        "    if BLOCK >= 2048:\n"
        "        num_warps = 8\n"
        "    kernel[(1,)](x, num_warps=num_warps)\n"
    )
    assert find_tunables(src, "triton") == []


def test_cuda_inline_defines_constexpr_and_linked_launch():
    src = source("cuda_scale_add.py")
    t = by_name(find_tunables(src, "cuda"))
    assert set(t) == {"ITEMS_PER_THREAD", "BLOCK_THREADS", "launch_threads"}
    assert t["BLOCK_THREADS"].kind == "gpu_threads" and t["BLOCK_THREADS"].candidates == (32, 64, 128, 256, 512, 1024)
    assert t["launch_threads"].origin == "launch" and len(t["launch_threads"].spans) == 3  # 256, 255 and 256
    out = apply(src, {"launch_threads": 512, "BLOCK_THREADS": 128})
    assert changed_lines(src, out) == [
        ("constexpr int BLOCK_THREADS = 256;", "constexpr int BLOCK_THREADS = 128;"),
        (
            "    add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(t.data_ptr<float>(), z.data_ptr<float>(), y.data_ptr<float>(), n);",
            "    add_kernel<<<(n + 511) / 512, 512, 0, stream>>>(t.data_ptr<float>(), z.data_ptr<float>(), y.data_ptr<float>(), n);",
        ),
    ]


def test_plain_cuda_file_marker_and_coupled_launch_left_alone():
    t = by_name(find_tunables(source("stencil.cu"), "cuda"))
    # RADIUS is not a tuning knob, kUnused is not UPPER_CASE, and the <<<..., 128>>> launch is coupled
    # to `per_block = 128 * ...` on the line above, so rewriting it alone would break the kernel.
    assert set(t) == {"ITEMS_PER_THREAD"}
    assert t["ITEMS_PER_THREAD"].marked and t["ITEMS_PER_THREAD"].candidates == (1, 2, 4)


def test_c_file_threads_are_cpu_threads():
    t = by_name(find_tunables(source("blur.c"), "c", cpu_count=16))
    assert set(t) == {"TILE", "NUM_THREADS", "UNROLL", "VEC_WIDTH"}
    assert t["NUM_THREADS"].kind == "threads" and t["NUM_THREADS"].candidates == (1, 2, 4, 8, 16)
    assert t["TILE"].origin == "define" and t["TILE"].candidates == (8, 16, 32, 64, 128, 256, 512)
    assert t["UNROLL"].origin == "constexpr"  # `static const int`
    assert t["VEC_WIDTH"].marked and t["VEC_WIDTH"].candidates == (1, 2, 4, 8)


def test_cpu_thread_candidates_follow_the_core_count():
    assert candidates_for("threads", 4, cpu_count=6) == (1, 2, 4, 6)
    assert candidates_for("threads", 1, cpu_count=1) == (1,)
    assert candidates_for("warps", 4) == (1, 2, 4, 8, 16, 32)
    assert candidates_for("stages", 3) == (1, 2, 3, 4, 5, 6)
    assert candidates_for("block", 1024) == (128, 256, 512, 1024, 2048, 4096)
    assert candidates_for("block", 96) == (16, 32, 64, 96, 128, 256, 512)  # current kept even if not 2^k
    assert candidates_for("block", 8, gpu=False) == (4, 8, 16, 32, 64)  # CPU register tiles may be small


def test_cpp_inline_file_marker_inside_the_string():
    t = by_name(find_tunables(source("cpu_tiled_transpose.py"), "cpp", cpu_count=8))
    assert set(t) == {"NUM_THREADS", "TILE"}
    assert t["TILE"].origin == "constexpr" and t["TILE"].marked and t["TILE"].candidates == (8, 16, 32, 64)
    assert t["NUM_THREADS"].kind == "threads" and t["NUM_THREADS"].candidates == (1, 2, 4, 8)


def test_python_comments_and_docstrings_are_not_c_code():
    src = '"""#define BLOCK 256 in a docstring is prose."""\n# #define TILE 64 in a comment\nx = 1\n'
    assert find_tunables(src, "triton") == []


def test_marker_makes_any_name_tunable_and_validates():
    src = "chunk = 48  # kforge: tune chunk in [16, 32, 64]\n"
    (t,) = find_tunables(src, "triton")
    assert (t.name, t.kind, t.candidates) == ("chunk", "block", (16, 32, 48, 64))
    (t,) = find_tunables("depth = 3  # kforge: tune depth in [2, 4]\n", "triton")
    assert (t.kind, t.candidates) == ("int", (2, 3, 4))  # a name with no known kind: only the marker's values
    with pytest.raises(KforgeError, match="kernels/x.py: line 1: 'kforge: tune CHUNK' names no integer"):
        find_tunables("# kforge: tune CHUNK in [1, 2]\nx = 1\n", "triton", path="kernels/x.py")
    with pytest.raises(KforgeError, match="non-integer values"):
        find_tunables("BLOCK = 64  # kforge: tune BLOCK in [32, big]\n", "triton")
    with pytest.raises(KforgeError, match="positive integer"):
        find_tunables("BLOCK = 64  # kforge: tune BLOCK in [0, 64]\n", "triton")


def test_bundled_examples_have_tunables_and_round_trip():
    """The project's own examples (what the quickstart tunes) expose their knobs to the tuner."""
    files = sorted(p for p in EXAMPLES.rglob("*.py") if "reference" not in p.name) if EXAMPLES.is_dir() else []
    if not files:
        pytest.skip("no bundled examples in this checkout")
    found = {}
    for path in files:
        text = path.read_text()
        tunables = find_tunables(text, None)
        found[path.name] = [t.name for t in tunables]
        if tunables:
            moved = {t.name: t.candidates[-1] if t.candidates[-1] != t.current else t.candidates[0] for t in tunables}
            out = apply(text, moved)
            ast.parse(out)
            assert apply(out, current_assignment(tunables)) == text
    assert any(found.values()), found


# --- rewriting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,language",
    [
        ("triton_softmax.py", "triton"),
        ("triton_matmul_autotune.py", "triton"),
        ("cuda_scale_add.py", "cuda"),
        ("stencil.cu", "cuda"),
        ("blur.c", "c"),
        ("cpu_tiled_transpose.py", "cpp"),
    ],
)
def test_round_trip(name: str, language: str):
    text = source(name)
    tunables = find_tunables(text, language)
    assert tunables
    assert apply(text, current_assignment(tunables), language) == text  # no-op edits change nothing
    for pick in (0, -1):
        target = {t.name: t.candidates[pick] for t in tunables}
        out = apply(text, target, language)
        again = find_tunables(out, language)
        assert [t.name for t in again] == [t.name for t in tunables]  # names are stable under apply
        assert current_assignment(again) == target
        assert apply(out, current_assignment(tunables), language) == text  # and back, byte for byte
        diff = [l for l in difflib.unified_diff(text.splitlines(), out.splitlines(), lineterm="", n=0) if l.startswith(("+", "-")) and not l.startswith(("+++", "---"))]
        assert len(diff) <= 2 * sum(len(t.spans) for t in tunables)  # only literal-bearing lines change
    if name.endswith(".py"):
        ast.parse(apply(text, {t.name: t.candidates[-1] for t in tunables}, language))


def test_apply_keeps_everything_but_the_digits():
    src = "BLOCK_SIZE = 1024  # rows ≥ 1 — unicode before and after ✓\nNUM_WARPS: int = 4\n"
    out = apply(src, {"BLOCK_SIZE": 256, "NUM_WARPS": 16})
    assert out == "BLOCK_SIZE = 256  # rows ≥ 1 — unicode before and after ✓\nNUM_WARPS: int = 16\n"


def test_apply_handles_multibyte_text_before_a_literal_on_the_same_line():
    src = "def f(x):\n    k[(1,)](x, '→→→', num_warps=4)\n"
    assert apply(src, {"num_warps": 8}) == "def f(x):\n    k[(1,)](x, '→→→', num_warps=8)\n"


def test_apply_rejects_unknown_names_and_bad_values():
    src = "BLOCK = 128\n"
    with pytest.raises(KeyError, match="found: BLOCK"):
        apply(src, {"TILE": 64})
    with pytest.raises(ValueError):
        apply(src, {"BLOCK": 0})
    with pytest.raises(ValueError):
        apply(src, {"BLOCK": 64.0})  # type: ignore[dict-item]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_rewritten_c_still_compiles_and_computes_the_same(tmp_path: Path):
    """A real compiler on every tuned variant: the rewrite keeps the program valid and its result."""
    text = source("blur.c")
    tunables = find_tunables(text, "c", cpu_count=4)
    variants = [current_assignment(tunables)] + [{t.name: t.candidates[i] for t in tunables} for i in (0, -1)]
    outputs = []
    for i, assignment in enumerate(variants):
        c_file = tmp_path / f"blur{i}.c"
        c_file.write_text(apply(text, assignment, "c"))
        exe = tmp_path / f"blur{i}"
        subprocess.run(["gcc", "-O2", "-fopenmp", "-std=c11", str(c_file), "-o", str(exe)], check=True, capture_output=True)
        outputs.append(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip())
    assert len(set(outputs)) == 1 and float(outputs[0]) > 0


def test_autotune_comprehension_and_a_settings_helpers_returned_sizes():
    src = (
        "import triton\n"
        "@triton.autotune(configs=[triton.Config({'BLOCK_M': bm}, num_warps=w) for bm in [64, 128] for w in (4, 8)],\n"
        "                 key=['M'])\n"
        "@triton.jit\n"
        "def k(x, BLOCK_M: tl.constexpr):\n"
        "    pass\n"
        "def settings(n):\n"
        "    BLOCK_SIZE = triton.next_power_of_2(n)\n"
        "    num_warps = 32 if n > 8192 else 16\n"
        "    if BLOCK_SIZE < 2048:\n"
        "        num_warps = 4\n"
        "    return BLOCK_SIZE, num_warps\n"
        "def launch(x):\n"
        "    num_warps = 4\n"
        "    num_warps = 8\n"
        "    k[(1,)](x, num_warps=num_warps)\n"
    )
    t = by_name(find_tunables(src, "triton"))
    assert {n: (v.current, v.kind, v.origin, v.group) for n, v in t.items()} == {
        "autotune.bm[0]": (64, "tile", "autotune", "configs@2"),
        "autotune.bm[1]": (128, "tile", "autotune", "configs@2"),
        "autotune.w[0]": (4, "warps", "autotune", "configs@2"),
        "autotune.w[1]": (8, "warps", "autotune", "configs@2"),
        "settings.num_warps@9": (32, "warps", "helper", "settings()"),
        "settings.num_warps@9.1": (16, "warps", "helper", "settings()"),
        "settings.num_warps@11": (4, "warps", "helper", "settings()"),
    }  # `launch` reassigns num_warps and returns nothing: not a helper's size, not tunable
    out = apply(src, {"autotune.bm[1]": 256, "settings.num_warps@9.1": 8})
    assert "for bm in [64, 256]" in out and "num_warps = 32 if n > 8192 else 8" in out


# --- sizes returned by an imported launch helper: pinned after its call ----------------------------------

IMPORTED_HELPER = (
    "import torch\n"
    "import triton\n"
    "import triton.language as tl\n"
    "from mylib.utils import calculate_settings\n"
    "\n"
    "@triton.jit\n"
    "def _scale_kernel(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):\n"
    "    row = tl.program_id(0)\n"
    "    cols = tl.arange(0, BLOCK_SIZE)\n"
    "    mask = cols < n_cols\n"
    "    x = tl.load(x_ptr + row * n_cols + cols, mask=mask)\n"
    "    tl.store(y_ptr + row * n_cols + cols, x * 2, mask=mask)\n"
    "\n"
    "def scale(x):\n"
    "    n_rows, n_cols = x.shape\n"
    "    y = torch.empty_like(x)\n"
    "    BLOCK_SIZE, num_warps = calculate_settings(n_cols)  # the row must fit one block\n"
    "    _scale_kernel[(n_rows,)](x, y, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)\n"
    "    return y\n"
)


def test_an_imported_helpers_warps_are_pinned_after_its_call_and_the_row_block_is_left_alone():
    t = by_name(find_tunables(IMPORTED_HELPER, "triton"))
    assert set(t) == {"num_warps"}  # BLOCK_SIZE must cover the row: pinning it smaller would be wrong
    warps = t["num_warps"]
    assert (warps.current, warps.kind, warps.origin, warps.line) == (UNPINNED, "warps", "call", 17)
    assert set(warps.candidates) == {UNPINNED, 1, 2, 4, 8, 16, 32}
    assert apply(IMPORTED_HELPER, current_assignment(t.values()), "triton") == IMPORTED_HELPER  # as written

    out = apply(IMPORTED_HELPER, {"num_warps": 8}, "triton")
    ast.parse(out)
    assert changed_lines(IMPORTED_HELPER, out) == [(
        "    BLOCK_SIZE, num_warps = calculate_settings(n_cols)  # the row must fit one block",
        "    BLOCK_SIZE, num_warps = calculate_settings(n_cols); num_warps = 8  # the row must fit one block",
    )]  # the helper still runs (BLOCK_SIZE keeps its value); only the warps are set
    again = by_name(find_tunables(out, "triton"))
    assert set(again) == {"num_warps"} and again["num_warps"].current == 8  # the pin is read back as the value
    assert apply(out, {"num_warps": 16}, "triton") == apply(IMPORTED_HELPER, {"num_warps": 16}, "triton")
    assert apply(out, {"num_warps": UNPINNED}, "triton") == IMPORTED_HELPER  # and unpinned, byte for byte


def test_pins_of_one_call_stack_and_a_free_tile_is_pinned_but_a_same_file_helper_is_not():
    src = (
        "from lib import settings, tiles\n"
        "def local_settings(n):\n"
        "    num_warps = 8 if n > 4096 else 4\n"
        "    return n, num_warps\n"
        "def launch(x, n):\n"
        "    BLOCK, num_warps, num_stages = settings(n)\n"
        "    BLOCK_M, BLOCK_N = tiles(n)\n"
        "    k[(1,)](x, BLOCK=BLOCK, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps, num_stages=num_stages)\n"
        "def other(x, n):\n"
        "    B, num_warps = local_settings(n)\n"
    )
    t = by_name(find_tunables(src, "triton"))
    assert {n: (v.kind, v.origin) for n, v in t.items()} == {
        "local_settings.num_warps@3": ("warps", "helper"),  # its literals are tuned where they are written
        "local_settings.num_warps@3.1": ("warps", "helper"),
        "num_warps": ("warps", "call"), "num_stages": ("stages", "call"),
        "BLOCK_M": ("tile", "call"), "BLOCK_N": ("tile", "call"),  # matmul tile sides: any size covers the loop
    }
    out = apply(src, {"num_warps": 2, "num_stages": 4, "BLOCK_N": 32}, "triton")
    assert "    BLOCK, num_warps, num_stages = settings(n); num_warps = 2; num_stages = 4\n" in out
    assert "    BLOCK_M, BLOCK_N = tiles(n); BLOCK_N = 32\n" in out
    again = find_tunables(out, "triton")
    assert [v.name for v in again] == list(t) and current_assignment(again) == {
        **current_assignment(t.values()), "num_warps": 2, "num_stages": 4, "BLOCK_N": 32}
    assert apply(out, {"num_warps": UNPINNED}, "triton") == apply(src, {"num_stages": 4, "BLOCK_N": 32}, "triton")
    assert apply(out, current_assignment(t.values()), "triton") == src
    with pytest.raises(ValueError):
        apply(src, {"local_settings.num_warps@3": UNPINNED}, "triton")  # a written literal has no "as written" 0


def test_a_marker_opts_a_helpers_row_block_in():
    marked = IMPORTED_HELPER.replace("    BLOCK_SIZE, num_warps =", "    # kforge: tune BLOCK_SIZE in [1024, 2048]\n    BLOCK_SIZE, num_warps =")
    t = by_name(find_tunables(marked, "triton"))
    assert (t["BLOCK_SIZE"].candidates, t["BLOCK_SIZE"].marked) == ((UNPINNED, 1024, 2048), True)
    out = apply(marked, {"BLOCK_SIZE": 2048, "num_warps": 8}, "triton")
    assert "calculate_settings(n_cols); BLOCK_SIZE = 2048; num_warps = 8  # the row" in out
