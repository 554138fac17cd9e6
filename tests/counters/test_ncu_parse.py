"""Reading ncu's raw CSV into the kernel digest, on output recorded from a real H200 run."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from kforge_bot.counters import ncu_parse
from kforge_bot.counters.ncu_parse import NcuOutputError

DATA = Path(__file__).parents[1] / "data" / "ncu"
RAW = (DATA / "raw_h200_scale_softmax.csv").read_text()
DETAILS = (DATA / "details_h200_scale_softmax.csv").read_text()
SOFTMAX = "void at::<unnamed>::cunn_SoftMaxForwardReg"

# What ncu prints when the driver keeps the counters to admins (no CSV follows).
PERMISSION_DENIED = """==PROF== Connected to process 812 (/usr/bin/python3.12)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on \
the target device 0. For instructions on enabling permissions and to get more information see \
https://developer.nvidia.com/ERR_NVGPUCTRPERM
ok 4096.0
==PROF== Disconnected from process 812
==WARNING== No kernels were profiled.
"""


def _by_name(rows: list[dict]) -> dict[str, dict]:
    return {("softmax" if row["kernel"].startswith(SOFTMAX) else row["kernel"]): row for row in rows}


def _edit_cell(text: str, kernel: str, column: str, value: str) -> str:
    """The recorded output with one kernel's cell replaced (the lines around the CSV kept as they are)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith('"'))
    table = list(csv.reader(lines[start:end]))
    col = table[0].index(column)
    for cells in table[2:]:
        if cells[table[0].index("Kernel Name")] == kernel:
            cells[col] = value
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(table)
    return "\n".join(lines[:start]) + "\n" + out.getvalue() + "\n".join(lines[end:]) + "\n"


def test_both_profiled_kernels_are_read_past_ncus_and_the_programs_own_lines() -> None:
    rows = ncu_parse.parse_raw(RAW)
    assert len(rows) == 2
    assert set(_by_name(rows)) == {"scale", "softmax"}


def test_the_triton_kernels_digest_holds_the_recorded_values() -> None:
    scale = _by_name(ncu_parse.parse_raw(RAW))["scale"]
    assert scale["duration_us"] == pytest.approx(30.592)  # 30,592 ns in the file
    assert scale["dram_throughput_pct"] == pytest.approx(74.90)
    assert scale["memory_throughput_pct"] == pytest.approx(74.90)
    assert scale["sm_throughput_pct"] == pytest.approx(6.81)
    assert scale["dram_read_bytes"] == 67_115_264  # bytes stay bytes, separators removed
    assert scale["registers_per_thread"] == 18
    assert scale["block"] == "(128, 1, 1)" and scale["grid"] == "(16384, 1, 1)"
    assert scale["stream"] == 7
    assert scale["achieved_occupancy_pct"] == pytest.approx(81.83)
    assert (scale["occupancy_limit_registers"], scale["occupancy_limit_shared_mem"],
            scale["occupancy_limit_warps"], scale["occupancy_limit_blocks"]) == (21, 32, 16, 32)
    assert scale["occupancy_limiter"] == "warps"
    assert scale["spills"] == 0
    assert scale["waves_per_sm"] == pytest.approx(7.76)


def test_stalls_are_the_top_three_by_ratio_and_never_selected() -> None:
    rows = _by_name(ncu_parse.parse_raw(RAW))
    stalls = rows["scale"]["stalls"]
    assert [s["reason"] for s in stalls] == ["long_scoreboard", "drain", "short_scoreboard"]
    assert stalls[0]["ratio"] == pytest.approx(150.54)
    assert "global or local memory" in stalls[0]["why"]
    for row in rows.values():
        assert len(row["stalls"]) == 3 and "selected" not in {s["reason"] for s in row["stalls"]}


def test_the_occupancy_limiter_takes_the_first_of_tied_limits() -> None:
    softmax = _by_name(ncu_parse.parse_raw(RAW))["softmax"]
    assert (softmax["occupancy_limit_registers"], softmax["occupancy_limit_warps"]) == (2, 2)
    assert softmax["occupancy_limiter"] == "registers"


def test_launch_figures_agree_with_the_details_page_of_the_same_program() -> None:
    details = {row["Metric Name"]: row["Metric Value"] for row in csv.DictReader(io.StringIO(
        DETAILS[DETAILS.index('"ID"'):])) if row["Kernel Name"] == "scale"}
    scale = _by_name(ncu_parse.parse_raw(RAW))["scale"]
    assert scale["registers_per_thread"] == float(details["Registers Per Thread"])
    assert scale["grid_size"] == float(details["Grid Size"].replace(",", ""))
    assert scale["occupancy_limit_warps"] == float(details["Block Limit Warps"])
    assert scale["occupancy_limit_registers"] == float(details["Block Limit Registers"])


def test_classes_and_speed_of_light_of_the_recorded_kernels() -> None:
    rows = _by_name(ncu_parse.parse_raw(RAW))
    assert ncu_parse.classify(rows["scale"]) == "memory-bound"
    assert ncu_parse.classify(rows["softmax"]) == "compute-bound"
    assert ncu_parse.speed_of_light(rows["scale"]) == pytest.approx(0.749)


def test_classify_below_the_floor_tells_under_occupied_from_latency_bound() -> None:
    base = {"memory_throughput_pct": 30.0, "sm_throughput_pct": 20.0, "waves_per_sm": 4.0}
    assert ncu_parse.classify({**base, "achieved_occupancy_pct": 12.0}) == "under-occupied"
    assert ncu_parse.classify({**base, "achieved_occupancy_pct": 70.0, "waves_per_sm": 0.5}) == "under-occupied"
    assert ncu_parse.classify({**base, "achieved_occupancy_pct": 70.0}) == "latency-bound"
    assert ncu_parse.classify({**base, "achieved_occupancy_pct": 70.0}, floor_ratio=0.25) == "memory-bound"
    assert ncu_parse.classify({}) == "unknown"
    assert ncu_parse.speed_of_light({}) is None


def test_summary_puts_the_longest_kernel_first() -> None:
    digest = ncu_parse.summary(ncu_parse.parse_raw(RAW))
    assert digest["dominant"].startswith(SOFTMAX)
    assert [r["kernel"] for r in digest["kernels"]][1] == "scale"
    assert digest["total_us"] == pytest.approx(30.592 + 54.88)
    assert digest["class"] == "compute-bound"
    assert digest["speed_of_light"] == pytest.approx(0.6939)
    assert ncu_parse.summary([])["dominant"] is None


def test_no_csv_raises_with_ncus_error_line_and_the_permission_fix() -> None:
    with pytest.raises(NcuOutputError) as caught:
        ncu_parse.parse_raw(PERMISSION_DENIED)
    message = str(caught.value)
    assert "ERR_NVGPUCTRPERM" in message and "\n" not in message
    assert isinstance(caught.value, ValueError)
    fix = ncu_parse.permission_problem(PERMISSION_DENIED)
    assert fix is not None and "NVreg_RestrictProfilingToAdminUsers=0" in fix and "\n" not in fix
    assert ncu_parse.permission_problem(RAW) is None


def test_no_csv_without_an_error_line_still_says_what_is_missing() -> None:
    with pytest.raises(NcuOutputError, match="no CSV"):
        ncu_parse.parse_raw("==PROF== Connected to process 1\nok\n")


def test_a_missing_or_non_numeric_cell_leaves_the_key_out() -> None:
    text = _edit_cell(RAW, "scale", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "")
    text = _edit_cell(text, "scale", "launch__occupancy_limit_warps", "n/a")
    text = _edit_cell(text, "scale", "smsp__sass_inst_executed_op_local_st.sum", "")
    scale = _by_name(ncu_parse.parse_raw(text))["scale"]
    assert "dram_throughput_pct" not in scale
    assert "occupancy_limit_warps" not in scale and "occupancy_limiter" not in scale  # not guessed from three
    assert "spills" not in scale and "local_store_instructions" not in scale
    assert scale["memory_throughput_pct"] == pytest.approx(74.90)  # the rest still read


def test_table_with_before_and_after_shows_both_sides() -> None:
    rows = ncu_parse.parse_raw(RAW)
    text = ncu_parse.table(rows[:1], rows)
    lines = text.strip().splitlines()
    assert lines[0].startswith("| side | kernel | time us |")
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["before", "after", "after"]
    assert "| 30.6 | 74.9 |" in text and "long_scoreboard 150.5" in text and "memory-bound" in text
    assert all(len(line.split("|")[2].strip().strip("`")) <= ncu_parse.KERNEL_CHARS for line in lines[2:])  # as text


def test_table_alone_limits_and_is_empty_safe() -> None:
    rows = ncu_parse.parse_raw(RAW)
    lines = ncu_parse.table(None, rows, limit=1).strip().splitlines()
    assert len(lines) == 3 and "side" not in lines[0] and SOFTMAX[:20] in lines[2]
    assert ncu_parse.table(None, []) == ""
    assert ncu_parse.table([], [{"kernel": "k"}]).count("| after | k |") == 1  # a row of dashes, not a crash


def test_to_csv_round_trips_through_the_csv_module() -> None:
    rows = ncu_parse.parse_raw(RAW)
    back = list(csv.DictReader(io.StringIO(ncu_parse.to_csv(rows))))
    assert [r["kernel"] for r in back] == [r["kernel"] for r in rows]
    assert back[0]["stalls"] == "long_scoreboard:150.54;drain:16.03;short_scoreboard:6.37"
    assert back[0]["registers_per_thread"] == "18" and back[0]["duration_us"] == "30.592"
    assert ncu_parse.to_csv([]) == ""
