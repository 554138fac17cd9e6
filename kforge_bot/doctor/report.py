"""The parent's report: runs the measuring child, compares its figures with the runner's stated facts, lists
what is missing or broken, and saves the measured ceilings as this machine's roofline."""

from __future__ import annotations

import datetime as _dt
import json
import platform
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kforge_bot import hardware
from kforge_bot.doctor.measure import quick_default
from kforge_bot.doctor.probes import (
    TOOLS,
    probe_hardware_counters,
    probe_perf_counters,
    probe_sandbox,
    probe_tools,
    run_group,
)
from kforge_bot.errors import KforgeError
from kforge_bot.text import one_line_tail

REPORT_KIND = "kforge-bot-doctor"
# A measured figure under this share of the project's reference measurement (or of the datasheet
# peak, where no reference exists) is flagged "low": large GEMMs and copies reach well under their datasheet peaks
# (pytorch/ao's roofline model; this project's runs: benchmarks/results/doctor_h200.txt).
LOW_VS_REFERENCE = 0.85
LOW_VS_DATASHEET = 0.70


def run_child(requested: str, quick: bool, timeout: float) -> dict[str, Any]:
    """Run `measure` in a child process; a crash or hang becomes an `error` entry."""
    with tempfile.TemporaryDirectory(prefix="kforge-doctor-") as tmp:
        out = Path(tmp) / "measure.json"
        argv = [sys.executable, "-m", "kforge_bot.doctor", "measure", "--target", requested, "--out", str(out)]
        if quick:
            argv.append("--quick")
        started = time.monotonic()
        rc, text = run_group(argv, timeout)
        elapsed = time.monotonic() - started
        if rc is None:
            return {"error": f"the measurement child did not finish within {timeout:g} s and was killed "
                             f"(a hung driver or device?); last output: {one_line_tail(text, 300)}"}
        if rc != 0 or not out.is_file():
            sig = f" (signal {-rc}: {signal.Signals(-rc).name})" if rc < 0 and -rc in signal.valid_signals() else ""
            return {"error": f"the measurement child failed with exit status {rc}{sig}; output: {one_line_tail(text, 400)}"}
        data = json.loads(out.read_text())
        data["child_seconds"] = round(elapsed, 2)
        return data


def _pct(measured: float | None, stated: float | None) -> float | None:
    return None if not measured or not stated else round(100.0 * measured / stated, 1)


def compare(measurements: dict[str, Any], runner: hardware.RunnerFacts | None) -> list[dict[str, Any]]:
    """One row per measured figure: measured vs the runner's datasheet and reference figures."""
    rows = []
    ds = runner.datasheet_ceilings() if runner else None
    ref = runner.reference_ceilings() if runner else None
    items: list[tuple[str, str, dict[str, Any], str, str | None]] = [
        ("copy bandwidth", "GB/s", measurements.get("copy", {}), "gbs", None)]
    for prec, m in measurements.get("matmul", {}).items():
        items.append((f"matmul {prec}", "TFLOP/s", m, "tflops", prec))
    for label, unit, m, key, prec in items:
        row: dict[str, Any] = {"figure": label, "unit": unit, "measured": m.get(key), "error": m.get("error")}
        stated = (ds.bandwidth_gbs if prec is None else ds.tflops.get(prec)) if ds else None
        reference = (ref.bandwidth_gbs if prec is None else ref.tflops.get(prec)) if ref else None
        row.update(datasheet=stated, pct_of_datasheet=_pct(row["measured"], stated),
                   reference=reference, pct_of_reference=_pct(row["measured"], reference))
        if row["error"]:
            row["status"] = "failed"
        elif reference:
            row["status"] = "ok" if row["measured"] >= LOW_VS_REFERENCE * reference else "low"
        elif stated:
            row["status"] = "ok" if row["measured"] >= LOW_VS_DATASHEET * stated else "low"
        else:
            row["status"] = "measured only"
        rows.append(row)
    return rows


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def build_report(requested: str = "auto", quick: bool | None = None, timeout: float = 900.0,
                 ncu_probe: bool = True) -> dict[str, Any]:
    """The whole doctor run as plain JSON-able data."""
    quick = quick_default() if quick is None else quick
    child = run_child(requested, quick, timeout)
    kind = child.get("target")
    tools = probe_tools(kind or (requested if requested != "auto" else "cpu"))
    device = child.get("device")
    runner = hardware.facts_for(kind, device["name"]) if kind and device else None
    measurements = child.get("measurements", {})
    report: dict[str, Any] = {
        "kind": REPORT_KIND, "version": 1, "created_at": _now(), "host": platform.node(),
        "platform": platform.platform(), "requested_target": requested, "target": kind, "quick": quick,
        "device": device, "available": child.get("available"), "software": child.get("software", {}),
        "tools": tools, "profilers": [], "measurements": measurements, "method": child.get("method"),
        "runner": None if runner is None else {"name": runner.name, "title": runner.title, "path": runner.path},
        "comparison": compare(measurements, runner) if measurements else [], "ceilings": None, "missing": [],
        "error": child.get("error"),
    }
    if child.get("profiler"):
        report["profilers"].append(child["profiler"])
    report["sandbox"] = probe_sandbox(kind or "cpu")
    if kind in ("cuda", "xpu") and ncu_probe:
        report["profilers"].append(probe_hardware_counters(kind))
    if kind == "cpu" and shutil.which("perf"):
        report["profilers"].append(probe_perf_counters())
    for t in tools:
        if t["relevant"] and t["found"] and t["name"] in ("unitrace", "vtune"):
            report["profilers"].append({"name": t["name"], "ok": t["ok"], "message": t["version"] or t["message"]})

    copy = measurements.get("copy", {})
    tflops = {p: m["tflops"] for p, m in measurements.get("matmul", {}).items() if "tflops" in m}
    if kind and device and (copy.get("gbs") or tflops):
        report["ceilings"] = hardware.ceilings_record(
            kind, device["name"], copy.get("gbs"), tflops, report["created_at"],
            {**(child.get("method") or {}), "host": report["host"], "torch": report["software"].get("torch")})
    report["missing"] = missing_pieces(report)
    report["ok"] = bool(device) and not report["error"] and all(r["status"] != "failed" for r in report["comparison"])
    return report


def missing_pieces(report: dict[str, Any]) -> list[str]:
    """One clear line for each thing that is absent or broken, and what it costs."""
    out = []
    if report.get("error"):
        out.append(report["error"])
    kind = report.get("target")
    for t in report["tools"]:
        if t["relevant"] and not t["ok"]:
            out.append(f"{t['name']}: {t['message']}: {TOOLS[t['name']][2]}")
    sw = report.get("software", {})
    if kind in ("cuda", "xpu") and not sw.get("triton"):
        hint = "pip install triton" if kind == "cuda" else "install pytorch-triton-xpu from PyTorch's xpu index"
        out.append(f"triton: not importable ({sw.get('triton_error', 'not installed')}): Triton candidates unavailable ({hint})")
    sandbox = report.get("sandbox") or {}
    if sandbox and not sandbox.get("ok"):
        fix = f" ({sandbox['hint']})" if sandbox.get("hint") else ""
        out.append(f"sandbox: {sandbox['message']}{fix}: pull-request and generated code would run unsandboxed, and "
                   "policies with isolation: required (the gate and the PR bot in Actions) refuse to run")
    for p in report["profilers"]:
        if not p.get("ok"):
            out.append(f"{p['name']}: {p.get('message')}")
    for r in report["comparison"]:
        if r["status"] == "failed":
            out.append(f"{r['figure']}: measurement failed: {r['error']}")
        elif r["status"] == "low":
            basis = (f"{r['pct_of_reference']}% of the reference measurement {r['reference']:g} {r['unit']}"
                     if r["reference"] else f"{r['pct_of_datasheet']}% of the datasheet {r['datasheet']:g} {r['unit']}")
            out.append(f"{r['figure']}: measured {r['measured']:.4g} {r['unit']} is low ({basis}): "
                       "another job on the device, power or clock limits, or a misconfigured driver?")
    if report.get("device") and report.get("runner") is None:
        out.append(f"no hardware runner describes '{report['device']['name']}' ({kind}): no stated facts to compare "
                   "with; the measured ceilings still serve as this machine's roofline after --save")
    if report.get("quick") and report.get("device"):
        out.append("quick mode: tiny sizes, the figures are not ceilings (run without --quick to measure them)")
    return out


def save_report_ceilings(report: dict[str, Any], path: str | Path | None = None) -> Path:
    if report.get("quick"):
        raise KforgeError("refusing to save quick-mode figures as ceilings", hint="run `kforge-bot doctor --save` without --quick")
    if not report.get("ceilings"):
        raise KforgeError("nothing measured to save", hint="see the missing pieces in the doctor report")
    return hardware.save_ceilings(report["ceilings"], path)

