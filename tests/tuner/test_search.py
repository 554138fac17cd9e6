"""The built-in tuner (kforge_bot.tuner.search): the profile hint and the coordinate descent over real tunables."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from kforge_bot.tuner.search import TunerSearch, joint_moves, profile_hint
from kforge_bot.tuner.tunables import Tunable, apply, find_tunables

DATA = Path(__file__).parents[1] / "data_agents"


def source(name: str) -> str:
    return (DATA / name).read_text()


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
    from kforge_bot.counters.ncu_parse import parse_raw

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


# --- joint moves --------------------------------------------------------------------------------------

MATMUL_TUNABLES = [
    make("BLOCK_M", "tile", 64, (16, 32, 64, 128, 256)),
    make("BLOCK_N", "tile", 64, (16, 32, 64, 128, 256)),
    make("NUM_STAGES", "stages", 2, (1, 2, 3, 4, 5, 6)),
    make("NUM_WARPS", "warps", 4, (1, 2, 4, 8, 16, 32)),
]
GROWN = {"BLOCK_M": 128, "BLOCK_N": 128, "NUM_STAGES": 3, "NUM_WARPS": 8}


def matmul_like(a: dict[str, int]) -> float:
    """The H200 matmul's trap: every single-parameter move is slower; larger tiles need more stages and warps."""
    if a == GROWN:
        return 1.9
    return 1.0 if a == {"BLOCK_M": 64, "BLOCK_N": 64, "NUM_STAGES": 2, "NUM_WARPS": 4} else 0.8


def test_a_joint_move_is_found_where_every_single_move_loses():
    search = TunerSearch(MATMUL_TUNABLES, hint="compute")
    proposals = run_search(search, matmul_like)
    assert search.best == (GROWN, 1.9)
    # Stages first (compute-bound), both ways; then, before the next parameter, the first joint move: tiles,
    # stages and warps grown together. A loop whose patience is six losing candidates in a row meets it.
    assert proposals[:3] == [{**search.current, "NUM_STAGES": 3}, {**search.current, "NUM_STAGES": 1}, GROWN]
    # Deterministic: the same proposals again, and within the budget.
    again = TunerSearch(MATMUL_TUNABLES, hint="compute")
    assert run_search(again, matmul_like) == proposals
    assert len(proposals) <= 2 * len(MATMUL_TUNABLES) + 32 + 2 * len(MATMUL_TUNABLES) * 2 + 32


def test_joint_moves_are_bounded_seeded_and_never_repeat_what_was_tried():
    best = {t.name: t.current for t in MATMUL_TUNABLES}
    moves = joint_moves(MATMUL_TUNABLES, best, hint="compute", seed=0, limit=40)
    assert moves[0] == GROWN and len(moves) == 40
    assert moves[1] == {"BLOCK_M": 128, "BLOCK_N": 128, "NUM_STAGES": 3, "NUM_WARPS": 4}  # tiles and stages
    assert all(sum(m[k] != best[k] for k in best) >= 2 for m in moves)
    assert len({tuple(sorted(m.items())) for m in moves}) == len(moves)
    assert joint_moves(MATMUL_TUNABLES, best, seed=3, limit=40) == joint_moves(MATMUL_TUNABLES, best, seed=3, limit=40)
    assert joint_moves(MATMUL_TUNABLES, best, seed=3, limit=60) != joint_moves(MATMUL_TUNABLES, best, seed=4, limit=60)
    # Registers or occupancy limiting: smaller tiles with fewer stages and warps first.
    assert joint_moves(MATMUL_TUNABLES, best, hint="registers", limit=1) == [
        {"BLOCK_M": 32, "BLOCK_N": 32, "NUM_STAGES": 1, "NUM_WARPS": 2}]
    tried = {tuple(sorted(GROWN.items())): 0.5}
    assert GROWN not in joint_moves(MATMUL_TUNABLES, best, hint="compute", tried=tried)


AUTOTUNED = '''
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=3),
    ],
    key=["M", "N"],
)
@triton.jit
def _kernel(x, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pass
'''


def test_an_autotune_list_pinned_to_each_of_its_configs_is_a_candidate():
    tunables = find_tunables(AUTOTUNED, "triton")
    best = {t.name: t.current for t in tunables}
    moves = joint_moves(tunables, best, limit=200)
    pin_first = {**best, "autotune[1].BLOCK_M": 64, "autotune[1].BLOCK_N": 64, "autotune[1].num_warps": 4,
                 "autotune[1].num_stages": 2}
    pin_second = {**best, "autotune[0].BLOCK_M": 128, "autotune[0].BLOCK_N": 64, "autotune[0].num_warps": 8,
                  "autotune[0].num_stages": 3}
    assert moves[:2] == [pin_first, pin_second]
    pinned = apply(AUTOTUNED, pin_second, "triton")
    assert pinned.count('triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=3)') == 2
    # Axis moves stay inside one triton.Config: config 0's tiles, stages and warps grow, config 1 is left alone.
    grow_first = {**best, "autotune[0].BLOCK_M": 128, "autotune[0].BLOCK_N": 128, "autotune[0].num_warps": 8,
                  "autotune[0].num_stages": 3}
    assert grow_first in moves


def test_the_tuner_searches_the_fixture_librarys_autotune_list_and_settings_helper():
    library = Path(__file__).parents[1] / "data" / "kernel_library" / "mylib"
    helper = find_tunables((library / "utils.py").read_text(), "triton")
    assert [(t.name, t.current, t.kind, t.group) for t in helper] == [
        ("calculate_settings.num_warps@16", 4, "warps", "calculate_settings()"),
        ("calculate_settings.num_warps@18", 16, "warps", "calculate_settings()"),
        ("calculate_settings.num_warps@20", 8, "warps", "calculate_settings()"),
    ]
    softmax = find_tunables((library / "ops" / "softmax.py").read_text(), "triton")
    assert {t.name for t in softmax} == {f"autotune[{i}].{k}" for i in (0, 1)
                                         for k in ("ROWS_PER_PROGRAM", "num_warps", "num_stages")}
    search = TunerSearch(softmax, hint="memory")
    first = search.propose()
    assert first is not None and sum(first[k] != v for k, v in search.current.items()) == 1
