"""Doctor's child, run in this process: quick measurements of the CPU that check their own results, and a
missing device explained rather than raised."""

from __future__ import annotations

import pytest
import torch

from kforge_bot.doctor import measure


def test_quick_mode_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, quick in (("1", True), ("yes", True), ("0", False), ("", False), ("no", False)):
        monkeypatch.setenv(measure.QUICK_ENV, value)
        assert measure.quick_default() is quick


@pytest.mark.slow
def test_a_quick_cpu_measurement_is_real_and_checked() -> None:
    threads = torch.get_num_threads()
    precision = torch.get_float32_matmul_precision()
    result = measure.measure("cpu", quick=True)
    assert result["target"] == "cpu" and result["available"]["cpu"] is True
    assert result["device"]["count"] == 1 and result["software"]["torch"] == torch.__version__
    copy = result["measurements"]["copy"]
    assert copy["bytes"] == 2 * (8 << 20) and copy["gbs"] > 0 and copy["reps"] == 5
    fp32 = result["measurements"]["matmul"]["fp32"]
    assert fp32["n"] == 256 and fp32["max_rel_error"] < 1e-4 and fp32["tflops"] > 0
    assert result["method"]["quick"] is True and result["method"]["timer"].startswith("host clock")
    assert result["profiler"]["ok"] is True
    # It leaves the process as it found it.
    assert torch.get_num_threads() == threads and torch.get_float32_matmul_precision() == precision


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_a_missing_device_is_an_error_entry_not_an_exception() -> None:
    result = measure.measure("cuda", quick=True)
    assert result["target"] is None and result["available"]["cuda"] is False
    assert result["error"].startswith("no cuda device: torch.cuda.is_available() is False")
    assert "measurements" not in result
