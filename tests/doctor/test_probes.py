"""The parent's probes: tools on PATH, perf and hardware counters, and the process-group runner they use."""

from __future__ import annotations

import os
import sys
import time

import pytest

from kforge_bot.doctor import probes
from kforge_bot.evaluate import isolation


def test_run_group_kills_the_whole_group():
    started = time.monotonic()
    rc, _ = probes.run_group(["sh", "-c", "sleep 30 & sleep 30; wait"], timeout=0.5)
    assert rc is None and time.monotonic() - started < 10


def test_the_ncu_probe_collects_the_metric_set_as_optimize_does(tmp_path, monkeypatch, recorded_ncu):
    """Through kforge_bot.counters.ncu with a stand-in ncu printing output recorded on an H200 (tests/fakes/ncu.py);
    a permission error comes back as the one-line reason with its fix."""
    from fakes.ncu import fake_ncu

    row = probes.probe_hardware_counters(target="cpu", timeout=60)
    assert row["ok"] is True and "counters of the probe kernel" in row["message"], row
    monkeypatch.setenv("KFORGE_NCU", str(fake_ncu(tmp_path / "denied", "print('==ERROR== ERR_NVGPUCTRPERM - The user "
                                                   "does not have permission to access NVIDIA GPU Performance Counters')")))
    row = probes.probe_hardware_counters(target="cpu", timeout=60)
    assert row["ok"] is False and "NVreg_RestrictProfilingToAdminUsers" in row["message"]
    monkeypatch.undo()
    assert "CUDA targets only" in probes.probe_hardware_counters(target="cpu")["message"]

def test_parse_perf_probe():
    # As printed by `perf stat -x, -e instructions,cycles true` in a VM without a PMU, and on a host with one.
    assert probes.parse_perf_probe(0, "<not supported>,,instructions,0,100.00,,\n<not supported>,,cycles,0,100.00,,")[0] is False
    assert probes.parse_perf_probe(0, "1234567,,instructions,812345,100.00,,\n2345678,,cycles,812345,100.00,,")[0] is True


def test_version_line_extraction():
    assert probes._version_line("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025\n"
                                "Cuda compilation tools, release 13.0, V13.0.88\n") == "Cuda compilation tools, release 13.0, V13.0.88"
    assert probes._version_line("NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025\n"
                                "Version 2025.3.0.0 (build 36273991) (public-release)\n").startswith("Version 2025.3.0.0")


def test_probe_tool_reports_missing_and_real_tools():
    missing = probes.probe_tool("nope", ["kforge-no-such-tool-xyz", "--version"])
    assert missing == {"name": "nope", "found": False, "path": None, "ok": False, "version": None,
                       "message": "not found on PATH"}
    real = probes.probe_tool("python", [sys.executable, "--version"])
    assert real["ok"] and real["version"].startswith("Python 3.")


@pytest.mark.slow
@pytest.mark.skipif(not isolation.probe().available and os.environ.get("CI") != "true",
                    reason="the sandbox is unavailable here")
def test_the_sandbox_probe_runs_torch_with_the_bytecode_workers_will_have(workers_use_bytecode_cache):
    result = probes.probe_sandbox("cpu")
    assert result["ok"], result["message"]
    assert result["bytecode"] == {"source": "kforge-bot cache", "directory": str(workers_use_bytecode_cache)}
    assert "torch's bytecode: kforge-bot cache" in result["message"]
    # How evaluations will start their workers: here, forked from the forkserver (evaluate.forked).
    assert "workers are forked from the forkserver" in result["message"]
