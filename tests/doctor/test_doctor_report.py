"""The parent's report: the measuring child's failure paths and the comparison with a runner's stated facts."""

from __future__ import annotations

import time

import pytest

from kforge_bot import hardware
from kforge_bot.doctor import report


def test_child_that_hangs_is_killed_and_reported():
    started = time.monotonic()
    result = report.run_child("cpu", quick=True, timeout=0.3)  # importing torch alone takes longer
    assert time.monotonic() - started < 30
    assert "did not finish within 0.3 s and was killed" in result["error"]


def test_compare_against_h200_facts():
    h200 = hardware.get_runner("h200")
    rows = report.compare({"copy": {"gbs": 4200.0}, "matmul": {"bf16": {"tflops": 600.0}, "fp16": {"tflops": 700.0},
                                                                "fp32": {"error": "RuntimeError: boom"}}}, h200)
    by = {r["figure"]: r for r in rows}
    assert by["copy bandwidth"]["pct_of_datasheet"] == 87.5 and by["copy bandwidth"]["reference"] == 4250
    assert by["copy bandwidth"]["status"] == "ok"  # 98.8% of the reference measurement
    assert by["matmul bf16"]["pct_of_reference"] == pytest.approx(76.9) and by["matmul bf16"]["status"] == "low"
    assert by["matmul fp16"]["reference"] is None and by["matmul fp16"]["status"] == "ok"  # 70.8% of 989
    assert by["matmul fp32"]["status"] == "failed"


