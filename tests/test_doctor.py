"""`kforge-bot doctor`: real (quick) measurements on this machine's CPU, report shape, failure paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kforge_bot import doctor, hardware
from kforge_bot.errors import KforgeError

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kforge_bot.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("doctor") / "report.json"
    r = _cli("doctor", "--target", "cpu", "--quick", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Measured ceilings vs runner facts" in r.stdout and "report written to" in r.stdout
    return json.loads(out.read_text())


def test_quick_cpu_run_measures_for_real(quick_report):
    r = quick_report
    assert r["kind"] == "kforge-bot-doctor" and r["ok"] is True and r["quick"] is True
    assert r["target"] == "cpu" and r["device"]["name"] and r["device"]["torch_threads"] >= 1
    copy = r["measurements"]["copy"]
    assert copy["bytes"] == 2 * (8 << 20) and copy["gbs"] > 0 and copy["min_s"] <= copy["median_s"] <= copy["max_s"]
    mm = r["measurements"]["matmul"]["fp32"]
    assert mm["n"] == 256 and mm["tflops"] > 0 and mm["max_rel_error"] < 1e-4
    assert mm["tflops"] == pytest.approx(2 * 256**3 / mm["median_s"] / 1e12)
    assert r["method"]["timer"].startswith("host clock")  # no device events on a CPU
    assert r["software"]["torch"] and r["software"]["python"]


def test_report_compares_with_the_runner_and_lists_missing_pieces(quick_report):
    r = quick_report
    assert r["runner"]["name"] == "cpu"
    figures = {row["figure"]: row for row in r["comparison"]}
    assert set(figures) == {"copy bandwidth", "matmul fp32"}
    assert all(row["status"] == "measured only" and row["datasheet"] is None for row in figures.values())
    assert any("quick mode" in line for line in r["missing"])
    prof = {p["name"]: p for p in r["profilers"]}
    assert prof["torch.profiler"]["ok"] is True and prof["torch.profiler"]["activities"] == ["CPU"]
    tools = {t["name"]: t for t in r["tools"]}
    assert set(tools) == set(doctor.TOOLS)
    assert tools["cc"]["relevant"] and not tools["ncu"]["relevant"]
    for t in tools.values():  # every relevant tool that does not work is explained
        if t["relevant"] and not t["ok"]:
            assert any(line.startswith(t["name"] + ":") for line in r["missing"])


def test_report_ceilings_are_a_loadable_roofline(quick_report, tmp_path, monkeypatch):
    rec = quick_report["ceilings"]
    assert rec["kind"] == "kforge-bot-ceilings" and rec["target"] == "cpu"
    report_file = tmp_path / "report.json"
    report_file.write_text(json.dumps(quick_report))
    c = hardware.load_ceilings(report_file)
    assert c.origin == "measured" and c.bandwidth_gbs == quick_report["measurements"]["copy"]["gbs"]
    # Saved where hardware.py looks, they become this machine's roofline.
    monkeypatch.setenv("KFORGE_BOT_CACHE_DIR", str(tmp_path / "cache"))
    assert hardware.ceilings_for("cpu", rec["device_name"]) is None
    hardware.save_ceilings(rec)
    assert hardware.ceilings_for("cpu", rec["device_name"]).tflops == {"fp32": pytest.approx(rec["tflops"]["fp32"])}


def test_quick_figures_are_never_saved_as_ceilings(tmp_path):
    r = _cli("doctor", "--target", "cpu", "--save", env={"KFORGE_BOT_CACHE_DIR": str(tmp_path), doctor.QUICK_ENV: "1"})
    assert r.returncode == 2
    assert "refusing to save quick-mode figures as ceilings" in r.stderr
    with pytest.raises(KforgeError, match="refusing to save quick-mode"):  # the library refuses too
        doctor.save_report_ceilings({"quick": True, "ceilings": {"kind": "kforge-bot-ceilings"}})
    assert not (tmp_path / "ceilings").exists()


def test_json_to_stdout(tmp_path):
    r = _cli("doctor", "--target", "cpu", "--json", "-", "--no-ncu", env={doctor.QUICK_ENV: "1"})
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)  # nothing else on stdout: torch's profiler chatter stays in the child
    assert report["quick"] is True and report["target"] == "cpu"


def test_missing_device_is_explained_and_exits_1():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    r = _cli("doctor", "--target", "cuda", "--json", "-", "--quick")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["ok"] is False and report["device"] is None and report["target"] is None
    assert report["error"].startswith("no cuda device: torch.cuda.is_available() is False")
    assert report["missing"][0] == report["error"]
    assert report["ceilings"] is None and report["comparison"] == []


def test_child_that_hangs_is_killed_and_reported():
    started = time.monotonic()
    result = doctor.run_child("cpu", quick=True, timeout=0.3)  # importing torch alone takes longer
    assert time.monotonic() - started < 30
    assert "did not finish within 0.3 s and was killed" in result["error"]


def test_run_group_kills_the_whole_group():
    started = time.monotonic()
    rc, _ = doctor._run_group(["sh", "-c", "sleep 30 & sleep 30; wait"], timeout=0.5)
    assert rc is None and time.monotonic() - started < 10


def test_the_cli_half_never_imports_torch():
    code = ("import sys, kforge_bot.commands.doctor, kforge_bot.doctor, kforge_bot.hardware, kforge_bot.policy; "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.stdout.strip() == "False", r.stderr


def test_compare_against_h200_facts():
    h200 = hardware.get_runner("h200")
    rows = doctor.compare({"copy": {"gbs": 4200.0}, "matmul": {"bf16": {"tflops": 600.0}, "fp16": {"tflops": 700.0},
                                                                "fp32": {"error": "RuntimeError: boom"}}}, h200)
    by = {r["figure"]: r for r in rows}
    assert by["copy bandwidth"]["pct_of_datasheet"] == 87.5 and by["copy bandwidth"]["reference"] == 4250
    assert by["copy bandwidth"]["status"] == "ok"  # 98.8% of the reference measurement
    assert by["matmul bf16"]["pct_of_reference"] == pytest.approx(76.9) and by["matmul bf16"]["status"] == "low"
    assert by["matmul fp16"]["reference"] is None and by["matmul fp16"]["status"] == "ok"  # 70.8% of 989
    assert by["matmul fp32"]["status"] == "failed"


def test_the_ncu_probe_collects_the_metric_set_as_optimize_does(tmp_path, monkeypatch, recorded_ncu):
    """Through kforge_bot.evaluate.ncu with a stand-in ncu printing output recorded on an H200 (tests/fakes/ncu.py);
    a permission error comes back as the one-line reason with its fix."""
    from fakes.ncu import fake_ncu

    row = doctor.probe_hardware_counters(target="cpu", timeout=60)
    assert row["ok"] is True and "counters of the probe kernel" in row["message"], row
    monkeypatch.setenv("KFORGE_NCU", str(fake_ncu(tmp_path / "denied", "print('==ERROR== ERR_NVGPUCTRPERM - The user "
                                                   "does not have permission to access NVIDIA GPU Performance Counters')")))
    row = doctor.probe_hardware_counters(target="cpu", timeout=60)
    assert row["ok"] is False and "NVreg_RestrictProfilingToAdminUsers" in row["message"]
    monkeypatch.undo()
    assert "CUDA targets only" in doctor.probe_hardware_counters(target="cpu")["message"]

def test_parse_perf_probe():
    # As printed by `perf stat -x, -e instructions,cycles true` in a VM without a PMU, and on a host with one.
    assert doctor.parse_perf_probe(0, "<not supported>,,instructions,0,100.00,,\n<not supported>,,cycles,0,100.00,,")[0] is False
    assert doctor.parse_perf_probe(0, "1234567,,instructions,812345,100.00,,\n2345678,,cycles,812345,100.00,,")[0] is True


def test_version_line_extraction():
    assert doctor._version_line("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025\n"
                                "Cuda compilation tools, release 13.0, V13.0.88\n") == "Cuda compilation tools, release 13.0, V13.0.88"
    assert doctor._version_line("NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025\n"
                                "Version 2025.3.0.0 (build 36273991) (public-release)\n").startswith("Version 2025.3.0.0")


def test_probe_tool_reports_missing_and_real_tools():
    missing = doctor.probe_tool("nope", ["kforge-no-such-tool-xyz", "--version"])
    assert missing == {"name": "nope", "found": False, "path": None, "ok": False, "version": None,
                       "message": "not found on PATH"}
    real = doctor.probe_tool("python", [sys.executable, "--version"])
    assert real["ok"] and real["version"].startswith("Python 3.")
