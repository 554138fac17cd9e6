"""The built-in tuner: finding tunables in real-looking kernels, rewriting them exactly, searching them."""

from __future__ import annotations

import ast
import difflib
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from kforge_bot.agents.tuner import (
    TunerSearch,
    Tunable,
    apply,
    candidates_for,
    current_assignment,
    find_tunables,
    kind_of,
    profile_hint,
)
from kforge_bot.errors import KforgeError

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


# --- profile hint -------------------------------------------------------------------------------------


def test_profile_hint():
    assert profile_hint(None) is None and profile_hint({}) is None
    assert profile_hint({"roofline": {"bound": "memory", "roofline_fraction": 0.3}}) == "memory"
    assert profile_hint({"roofline": {"bound": "compute"}}) == "compute"
    assert profile_hint({"kernels": [{"name": "k", "calls": 1, "us": 6.0}], "device_us": 6.0}) == "launch"
    assert profile_hint({"device_us": 900.0, "ncu": {"k": {"dram_throughput_pct": 80.0, "sm_throughput_pct": 20.0}}}) == "memory"
    assert profile_hint({"device_us": 900.0, "ncu": [{"kernel": "k", "dram_throughput_pct": 10.0, "sm_throughput_pct": 70.0}]}) == "compute"
    assert profile_hint({"roofline": {"bound": "unknown", "arithmetic_intensity": 0.5, "ridge_intensity": 200.0}}) == "memory"
    assert profile_hint({"device_us": 900.0}) is None


# --- search -------------------------------------------------------------------------------------------


def make(name: str, kind: str, current: int, candidates: tuple[int, ...], marked: bool = False) -> Tunable:
    return Tunable(name, kind, current, candidates, "constant", 1, ((0, 1, 0),), marked)


def run_search(search: TunerSearch, objective) -> list[dict[str, int]]:
    proposals = []
    while not search.done():
        a = search.propose()
        assert a is not None
        proposals.append(a)
        search.record(a, objective(a))
    assert search.propose() is None
    return proposals


def softmax_like(a: dict[str, int]) -> float | None:
    """A speedup surface shaped like the H200 softmax measurements: best at 8 warps, 1024 blocks."""
    if a["BLOCK"] < 256:
        return None  # too small for the row: the harness would call it incorrect
    return 1.0 + 0.6 - 0.15 * abs(math.log2(a["NUM_WARPS"]) - 3) - 0.1 * abs(math.log2(a["BLOCK"]) - 10)


def test_coordinate_descent_finds_the_optimum_without_duplicates():
    tunables = [make("NUM_WARPS", "warps", 2, (1, 2, 4, 8, 16, 32)), make("BLOCK", "block", 256, (32, 64, 128, 256, 512, 1024, 2048))]
    search = TunerSearch(tunables)
    baseline = softmax_like({"NUM_WARPS": 2, "BLOCK": 256})
    search.results[tuple(sorted({"NUM_WARPS": 2, "BLOCK": 256}.items()))] = baseline
    proposals = run_search(search, softmax_like)
    keys = [tuple(sorted(p.items())) for p in proposals]
    assert len(keys) == len(set(keys))  # never twice
    assert {"NUM_WARPS": 2, "BLOCK": 256} not in proposals  # the baseline is not re-measured
    best, score = search.best
    assert best == {"NUM_WARPS": 8, "BLOCK": 1024} and score == pytest.approx(1.6)
    assert len(proposals) <= 12  # coordinate descent, not a grid (6 x 7 = 42)


def test_hint_orders_the_parameters_and_directions():
    tunables = [
        make("NUM_STAGES", "stages", 2, (1, 2, 3, 4)),
        make("NUM_WARPS", "warps", 4, (1, 2, 4, 8)),
        make("BLOCK", "block", 256, (128, 256, 512)),
        make("THREADS", "threads", 4, (1, 2, 4, 8)),
    ]
    assert TunerSearch(tunables, hint="memory").propose() == {"NUM_STAGES": 2, "NUM_WARPS": 4, "BLOCK": 512, "THREADS": 4}
    assert TunerSearch(tunables, hint="compute").propose() == {"NUM_STAGES": 3, "NUM_WARPS": 4, "BLOCK": 256, "THREADS": 4}
    assert TunerSearch(tunables, hint="launch").propose()["BLOCK"] == 512  # fewer, larger programs
    launch = TunerSearch(tunables, hint="launch")
    assert [t.name for t, _ in launch.order()][:2] == ["BLOCK", "THREADS"]
    assert dict((t.name, d) for t, d in launch.order())["THREADS"] == -1
    # without a hint: CPU threads first, then warps
    assert TunerSearch(tunables).propose() == {"NUM_STAGES": 2, "NUM_WARPS": 4, "BLOCK": 256, "THREADS": 8}
    # a marked parameter goes first whatever the hint
    marked = tunables + [make("VEC", "small", 2, (1, 2, 4), marked=True)]
    assert TunerSearch(marked, hint="memory").propose()["VEC"] == 4


def test_failed_direction_turns_around_and_failures_are_never_best():
    tunables = [make("NUM_WARPS", "warps", 4, (1, 2, 4, 8, 16))]

    def objective(a):
        return None if a["NUM_WARPS"] > 4 else {1: 1.02, 2: 1.3, 4: 1.0}[a["NUM_WARPS"]]

    proposals = run_search(TunerSearch(tunables, hint="memory"), objective)
    assert [p["NUM_WARPS"] for p in proposals] == [8, 2, 1]  # up fails at once, down improves, then stops


def test_min_gain_ignores_noise():
    tunables = [make("NUM_WARPS", "warps", 4, (1, 2, 4, 8, 16))]
    search = TunerSearch(tunables, min_gain=0.02)
    proposals = run_search(search, lambda a: 1.005)  # within noise of the baseline
    assert [p["NUM_WARPS"] for p in proposals] == [8, 2]
    assert search.best == ({"NUM_WARPS": 4}, 1.0)  # a 0.5% "gain" is not progress


def test_baseline_can_be_measured_first_and_trials_capped():
    tunables = [make("BLOCK", "block", 256, (64, 128, 256, 512, 1024))]
    search = TunerSearch(tunables, baseline_score=None, max_trials=3)
    first = search.propose()
    assert first == {"BLOCK": 256}
    search.record(first, 1.0)
    with pytest.raises(RuntimeError):
        search.propose()
        search.propose()
    search.record({"BLOCK": 512}, 1.1)
    proposals = [first, {"BLOCK": 512}] + run_search(search, lambda a: 1.2 if a["BLOCK"] == 1024 else 0.9)
    assert len(proposals) == 3 and search.done()


def test_resume_replays_recorded_results_without_proposing_them():
    tunables = [make("NUM_WARPS", "warps", 2, (1, 2, 4, 8, 16, 32)), make("BLOCK", "block", 256, (256, 512, 1024, 2048))]
    first = TunerSearch(tunables)
    done = []
    for _ in range(4):
        a = first.propose()
        first.record(a, softmax_like(a))
        done.append((a, softmax_like(a)))
    expected_next = first.propose()

    resumed = TunerSearch(tunables)
    for a, score in done:
        resumed.record(a, score)
    assert resumed.propose() == expected_next
    assert resumed.best == first.best


def test_missing_current_values_are_an_error():
    with pytest.raises(KeyError):
        TunerSearch([make("BLOCK", "block", 256, (128, 256))], current={})


def test_search_over_real_tunables_rewrites_real_source():
    """The loop's use: find, search, apply: every proposal becomes a distinct, valid source."""
    text = source("triton_softmax.py")
    tunables = find_tunables(text, "triton")
    search = TunerSearch(tunables, hint="memory")
    sources = set()
    while not search.done():
        a = search.propose()
        candidate = apply(text, a, "triton")
        ast.parse(candidate)
        sources.add(candidate)
        search.record(a, 1.0 + 0.05 * a["NUM_WARPS"] if a["NUM_WARPS"] <= 8 else 0.7)
    assert len(sources) == search.proposed
    assert search.best[0]["NUM_WARPS"] == 8


def test_the_hardware_counters_choose_the_tuners_first_move() -> None:
    """ncu's rows (recorded on an H200) outrank a roofline guess: the longest kernel there is compute-bound;
    spills or a register-capped occupancy point at warps and smaller blocks; too few warps at smaller blocks."""
    from kforge_bot.evaluate.ncu_parse import parse_raw

    rows = parse_raw((Path(__file__).parents[1] / "data" / "ncu" / "raw_h200_scale_softmax.csv").read_text())
    assert profile_hint({"ncu": rows, "roofline": {"bound": "memory"}}) == "compute"
    longest = max(rows, key=lambda r: r["duration_us"])
    spilling = [{**longest, "spills": 12.0}]
    assert profile_hint({"ncu": spilling}) == "registers"
    thin = [{**longest, "achieved_occupancy_pct": 10.0, "occupancy_limiter": "blocks", "sm_throughput_pct": 20.0,
             "memory_throughput_pct": 20.0}]
    assert profile_hint({"ncu": thin}) == "occupancy"
    tunables = [make("NUM_WARPS", "warps", 4, (1, 2, 4, 8)), make("BLOCK", "block", 256, (128, 256, 512))]
    assert TunerSearch(tunables, hint="registers").propose() == {"NUM_WARPS": 8, "BLOCK": 256}  # more warps first
    assert TunerSearch(tunables, hint="occupancy").propose() == {"NUM_WARPS": 4, "BLOCK": 128}  # smaller blocks
