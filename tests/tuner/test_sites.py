"""Where a kernel source holds tunable literals (kforge_bot.tuner.sites)."""

from __future__ import annotations

import ast

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.tuner.sites import SourceText, c_sites, find_markers, kind_of, python_sites
from kforge_bot.tuner.tunables import find_tunables


def test_kinds_from_names():
    assert kind_of("ROWS_PER_PROGRAM", gpu=True) == "small"
    assert kind_of("ITEMS_PER_THREAD", gpu=True) == "small"
    assert kind_of("GROUP_SIZE_M", gpu=True) == "small"
    assert kind_of("BLOCK_SIZE_M", gpu=True) == "tile" and kind_of("BK", gpu=True) == "tile"
    assert kind_of("BLOCK_SIZE", gpu=True) == "block" and kind_of("TILE", gpu=False) == "block"
    assert kind_of("THREADS", gpu=True) == "gpu_threads" and kind_of("THREADS", gpu=False) == "threads"
    assert kind_of("THREADS_PER_BLOCK", gpu=False) == "gpu_threads"
    assert kind_of("NUM_WARPS", gpu=True) == "warps" and kind_of("NUM_STAGES", gpu=True) == "stages"
    for name in ("N", "M", "EPS", "SCALE", "HIDDEN", "SEED"):
        assert kind_of(name, gpu=True) is None
    src = "ROWS_PER_PROGRAM = 1\nEPS = 1e-5\nN = 4096\n"
    assert [t.name for t in find_tunables(src, "triton")] == ["ROWS_PER_PROGRAM"]


def test_python_sites_are_the_literals_spans_and_the_strings_are_left_for_the_c_scanner() -> None:
    src = 'BLOCK_SIZE = 128\nN = 4096\nCODE = """\n#define TILE 16\n"""\n\ndef f():\n    num_warps = 4\n    return num_warps\n'
    text = SourceText(src)
    sites, strings = python_sites(ast.parse(src), text, gpu=True, forced=set())
    found = {(s.base, s.origin, s.current) for s in sites}
    assert found == {("BLOCK_SIZE", "constant", 128), ("num_warps", "local", 4)}
    block = next(s for s in sites if s.base == "BLOCK_SIZE")
    (start, end, offset), = block.spans
    assert src[start:end] == "128" and offset == 0 and block.line == 1
    (s0, s1), = strings  # the C code inside the string literal, for c_sites
    assert "#define TILE 16" in src[s0:s1]
    c = c_sites(src, strings, text, gpu=True, forced=set())
    assert [(s.base, s.origin, s.current, s.line) for s in c] == [("TILE", "define", 16, 4)]


def test_a_launch_moves_with_its_grid_unless_the_grid_is_computed_above() -> None:
    coupled = "k<<<(n + 255) / 256, 256>>>(x, n);\n"
    (site,) = c_sites(coupled, [(0, len(coupled))], SourceText(coupled), gpu=True, forced=set())
    assert site.base == "launch_threads" and site.current == 256
    assert [(coupled[s:e], off) for s, e, off in site.spans] == [("255", -1), ("256", 0), ("256", 0)]
    apart = "int blocks = (n + 255) / 256;\nk<<<blocks, 256>>>(x, n);\n"
    assert c_sites(apart, [(0, len(apart))], SourceText(apart), gpu=True, forced=set()) == []


def test_markers_name_values_and_bad_ones_are_errors_naming_the_line() -> None:
    (marker,) = find_markers("x = 1\nBLOCK = 64  # kforge: tune BLOCK in [32, 0x40, 128]\n", "k.py")
    assert (marker.name, marker.values, marker.line) == ("BLOCK", (32, 64, 128), 2)
    with pytest.raises(KforgeError, match="line 1: 'kforge: tune B' lists non-integer values"):
        find_markers("// kforge: tune B in [a, b]\n", "k.cu")
    with pytest.raises(KforgeError, match="needs positive integer values"):
        find_markers("# kforge: tune B in [0]\n", "k.py")
