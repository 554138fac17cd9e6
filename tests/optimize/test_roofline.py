"""Where a measured kernel sits on its roofline (kforge_bot.optimize.roofline)."""

from __future__ import annotations

import pytest
from test_trajectory import result

from kforge_bot.hardware import Ceilings, roofline
from kforge_bot.optimize.roofline import output_bytes, roofline_position, workload


def test_output_bytes_and_bandwidth_position_from_measured_times() -> None:
    r = result(base_ms=2.0, cand_ms=1.0, shape=[256, 256], dtype="float16")
    assert output_bytes(r) == [256 * 256 * 2]
    workload = {"shape_sets": [{"bytes": 4_000_000, "flops": None}], "basis": "compulsory traffic"}
    ceilings = Ceilings(1000.0, {"fp16": 100.0}, "measured", "doctor").to_dict()
    base = roofline_position(r, "baseline", workload, ceilings)
    best = roofline_position(r, "candidate", workload, ceilings)
    assert base is not None and best is not None
    assert base["achieved_gbs"] == pytest.approx(2.0)  # 4 MB in 2 ms
    assert best["achieved_gbs"] == pytest.approx(4.0)
    assert best["bandwidth_fraction"] == pytest.approx(0.004) and best["roofline_fraction"] == best["bandwidth_fraction"]
    assert best["bound"] == "unknown" and best["flops_known"] is False  # no FLOPs: no claim about the bound
    assert roofline_position(result("incorrect"), "candidate", workload, ceilings) is None
    assert roofline_position(r, "candidate", None, ceilings) is None
    no_ceilings = roofline_position(r, "candidate", workload, None)
    assert no_ceilings is not None and no_ceilings["achieved_gbs"] == pytest.approx(4.0)
    assert no_ceilings["bandwidth_fraction"] is None


def test_position_with_flops_is_the_hardware_roofline() -> None:
    r = result(base_ms=4.0, cand_ms=2.0, dtype="float16")
    workload = {"shape_sets": [{"bytes": 1e6, "flops": 4e9}], "basis": "model"}
    ceil = Ceilings(2000.0, {"fp16": 500.0}, "reference", "project")
    pos = roofline_position(r, "candidate", workload, ceil.to_dict())
    expected = roofline(1e6, 4e9, 0.002, ceil, "fp16")
    assert pos is not None and pos["roofline_fraction"] == pytest.approx(expected["roofline_fraction"])
    assert pos["bound"] == expected["bound"] == "compute" and pos["achieved_tflops"] == pytest.approx(2.0)


def test_the_workload_is_the_callers_model_or_the_compulsory_traffic_of_the_baseline() -> None:
    shapes = [{"n": 256}, {"n": 512}]
    modelled = workload(shapes, None, lambda shape: (8.0 * shape["n"], 2.0 * shape["n"]))
    assert modelled["shape_sets"] == [{"bytes": 2048.0, "flops": 512.0}, {"bytes": 4096.0, "flops": 1024.0}]
    baseline = result(shape=[256, 256], dtype="float16")
    baseline["details"]["input_bytes"] = [1000, 2000]
    counted = workload(shapes, baseline)
    assert counted["shape_sets"][0] == {"bytes": 1000 + 256 * 256 * 2, "input_bytes": 1000,
                                        "output_bytes": 256 * 256 * 2, "flops": None}
    assert counted["shape_sets"][1]["bytes"] is None  # no output recorded for the second set
    assert counted["basis"].startswith("compulsory traffic") and "error" not in counted
    assert workload(shapes, result())["error"] == "the baseline's result does not say the inputs' sizes"

