"""`kforge-bot doctor` end to end: real (quick) measurements on this machine's CPU, the report's shape, failure
paths, and the CLI half that never imports torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_bot import hardware
from kforge_bot.doctor import measure, probes, report
from kforge_bot.errors import KforgeError

REPO = Path(__file__).resolve().parents[2]


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


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert set(tools) == set(probes.TOOLS)
    assert tools["cc"]["relevant"] and not tools["ncu"]["relevant"]
    for t in tools.values():  # every relevant tool that does not work is explained
        if t["relevant"] and not t["ok"]:
            assert any(line.startswith(t["name"] + ":") for line in r["missing"])


@pytest.mark.slow
def test_report_ceilings_are_a_loadable_roofline(quick_report, tmp_path, monkeypatch):
    rec = quick_report["ceilings"]
    assert rec["kind"] == "kforge-bot-ceilings" and rec["target"] == "cpu"
    report_file = tmp_path / "report.json"
    report_file.write_text(json.dumps(quick_report))
    c = hardware.load_ceilings(report_file)
    assert c.origin == "measured" and c.bandwidth_gbs == quick_report["measurements"]["copy"]["gbs"]
    # Saved where hardware.py looks, they become this machine's roofline.
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(tmp_path / "cache"))
    assert hardware.ceilings_for("cpu", rec["device_name"]) is None
    hardware.save_ceilings(rec)
    assert hardware.ceilings_for("cpu", rec["device_name"]).tflops == {"fp32": pytest.approx(rec["tflops"]["fp32"])}


def test_quick_figures_are_never_saved_as_ceilings(tmp_path):
    r = _cli("doctor", "--target", "cpu", "--save", env={"KFORGE_CACHE_DIR": str(tmp_path), measure.QUICK_ENV: "1"})
    assert r.returncode == 2
    assert "refusing to save quick-mode figures as ceilings" in r.stderr
    with pytest.raises(KforgeError, match="refusing to save quick-mode"):  # the library refuses too
        report.save_report_ceilings({"quick": True, "ceilings": {"kind": "kforge-bot-ceilings"}})
    assert not (tmp_path / "ceilings").exists()


@pytest.mark.slow
def test_json_to_stdout(tmp_path):
    r = _cli("doctor", "--target", "cpu", "--json", "-", "--no-ncu", env={measure.QUICK_ENV: "1"})
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)  # nothing else on stdout: torch's profiler chatter stays in the child
    assert report["quick"] is True and report["target"] == "cpu"


@pytest.mark.slow
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

def test_the_cli_half_never_imports_torch():
    code = ("import sys, kforge_bot.commands.doctor, kforge_bot.doctor.probes, kforge_bot.doctor.report, "
            "kforge_bot.hardware, kforge_bot.config.policy; "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.stdout.strip() == "False", r.stderr



@pytest.mark.slow
def test_doctor_leaves_nothing_in_the_temporary_folder(tmp_path: Path) -> None:
    """It left torch's compiler cache (torchinductor_<user>) and the sandbox probe's private folders there."""
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}  # as a user's shell has it
    env.update(TMPDIR=str(tmp_path / "tmp"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "kforge_bot.cli", "doctor", "--target", "cpu", "--quick"],
                       capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []
