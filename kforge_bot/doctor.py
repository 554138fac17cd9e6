"""`kforge-bot doctor`: what this machine has, what works, and its measured ceilings.

Two halves. The parent (the CLI) probes tools with subprocesses and never imports torch, so a
broken driver cannot take it down. The measurements (device, profiler, copy bandwidth, matmul
FLOP/s) run in a child, `python -m kforge_bot.doctor measure ...`, which writes JSON to a file
(torch and its profiler print to stdout). The parent compares the child's figures with the runner's
stated facts and can save them as this machine's roofline (`kforge_bot.hardware.ceilings_for`).

Sizes: copies of 1 GiB on a GPU (256 MiB on a CPU) so caches do not help, and 8192^3 matmuls on a
GPU (2048^3 on a CPU), like the project's reference measurements. `--quick` (or
KFORGE_DOCTOR_QUICK=1) uses tiny sizes so tests run in seconds; its figures are not ceilings and
it refuses `--save`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from kforge_bot import hardware
from kforge_bot.targets import cpu_model

QUICK_ENV = "KFORGE_DOCTOR_QUICK"
TARGET_CHOICES = ("auto", "cpu", "cuda", "xpu", "mps")
REPORT_KIND = "kforge-bot-doctor"
# A measured figure under this share of the project's reference measurement (or of the datasheet
# peak, where no reference exists) is flagged "low": large GEMMs reach about 78% of peak and large
# copies about 90% on Hopper (pytorch/ao's roofline model; our H200 runs: 78-81% and 88-90%).
LOW_VS_REFERENCE = 0.85
LOW_VS_DATASHEET = 0.70

# ---------------------------------------------------------------------------------------------
# Tools (parent side: subprocesses only)

# name -> (argv, targets it matters for, what is lost without it)
TOOLS: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    "nvidia-smi": (["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"],
                   ("cuda",), "no NVIDIA driver tools: install the NVIDIA driver (it ships nvidia-smi)"),
    "nvcc": (["nvcc", "--version"], ("cuda",),
             "CUDA C++ candidates cannot compile: install the CUDA toolkit (Triton kernels do not need it)"),
    "ncu": (["ncu", "--version"], ("cuda",),
            "no hardware counters in profiles: install Nsight Compute (ncu)"),
    "compute-sanitizer": (["compute-sanitizer", "--version"], ("cuda",),
                          "no memory checking of failing candidates: compute-sanitizer ships with the CUDA toolkit"),
    "cc": (["cc", "--version"], ("cpu", "cuda", "xpu", "mps"),
           "no C/C++ compiler: torch cpp_extension kernels (and Triton's launcher build) fail; install gcc or clang"),
    "icpx": (["icpx", "--version"], ("xpu",),
             "SYCL candidates cannot compile: install the oneAPI DPC++ compiler (icpx)"),
    "sycl-ls": (["sycl-ls"], ("xpu",), "cannot list SYCL devices: sycl-ls ships with oneAPI DPC++"),
    "xpu-smi": (["xpu-smi", "discovery"], ("xpu",), "no Intel GPU management tool: install xpu-smi"),
    "unitrace": (["unitrace", "--version"], ("xpu",),
                 "no unitrace kernel traces: build unitrace from intel/pti-gpu (the PyTorch profiler still works)"),
    "vtune": (["vtune", "--version"], ("xpu",), "no VTune GPU analysis: install Intel VTune Profiler"),
    "perf": (["perf", "--version"], ("cpu",), "no CPU hardware counters: install linux perf"),
}


def _version_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"(version|release)\s*v?\d", ln, re.IGNORECASE) and re.search(r"\d+\.\d+", ln):
            return ln[:160]
    for ln in lines:
        if re.search(r"\d+\.\d+", ln):
            return ln[:160]
    return lines[0][:160] if lines else ""


def probe_tool(name: str, argv: list[str], timeout: float = 30.0) -> dict[str, Any]:
    """Run a tool's version command; found/ok/version/message, never raises."""
    path = shutil.which(argv[0])
    out: dict[str, Any] = {"name": name, "found": path is not None, "path": path, "ok": False,
                           "version": None, "message": None}
    if path is None:
        out["message"] = "not found on PATH"
        return out
    try:
        proc = subprocess.run([path, *argv[1:]], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        out["message"] = f"`{' '.join(argv)}` did not answer within {timeout:g} s"
        return out
    except OSError as exc:
        out["message"] = f"cannot run: {exc}"
        return out
    text = (proc.stdout or "") + (proc.stderr or "")
    out["ok"] = proc.returncode == 0
    out["version"] = (text.strip().splitlines() or [""])[0][:160] if name in ("nvidia-smi", "sycl-ls", "xpu-smi") \
        else _version_line(text)
    if not out["ok"]:
        out["message"] = f"exit status {proc.returncode}: {_tail(text, 200)}"
    return out


def probe_tools(target: str) -> list[dict[str, Any]]:
    """Every known tool, each marked `relevant` for the given target kind."""
    rows = []
    for name, (argv, targets, _) in TOOLS.items():
        row = probe_tool(name, argv)
        row["relevant"] = target in targets
        rows.append(row)
    return rows


def parse_perf_probe(returncode: int | None, output: str) -> tuple[bool, str]:
    """Read `perf stat -x, -e instructions,cycles true` (CSV: value,unit,event,...)."""
    if returncode is None:
        return False, "perf stat did not finish"
    counted = [ln for ln in output.splitlines() if re.match(r"^\d+,", ln)]
    if counted:
        return True, "perf read hardware counters (instructions, cycles)"
    if "<not supported>" in output or "<not counted>" in output:
        return False, ("perf runs but hardware counters are not available here (a VM or container without a "
                       "virtual PMU?); torch.profiler still works")
    return False, f"perf stat failed (exit status {returncode}): {_tail(output, 200)}"


def probe_perf_counters() -> dict[str, Any]:
    perf = shutil.which("perf")
    row: dict[str, Any] = {"name": "perf counters", "ok": False, "message": "perf not found on PATH",
                           "command": "perf stat -x, -e instructions,cycles true"}
    if perf:
        true = shutil.which("true") or "/bin/true"
        rc, out = _run_group([perf, "stat", "-x,", "-e", "instructions,cycles", true], 30)
        row["ok"], row["message"] = parse_perf_probe(rc, out)
    return row


_PROBE_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.ones(1 << 20)]


def get_init_inputs():
    return []
"""


def probe_hardware_counters(target: str = "cuda", timeout: float = 180.0) -> dict[str, Any]:
    """Collect the counters for one tiny kernel exactly as `optimize` does, inside the workers' sandbox: ncu
    on CUDA (kforge_bot.evaluate.ncu), unitrace on Intel XPU (kforge_bot.evaluate.unitrace). Tells whether
    counters are readable here, and what it costs."""
    from kforge_bot.evaluate.counter_tools import tool_for
    from kforge_bot.spec import load_spec

    tool = tool_for(target)
    row: dict[str, Any] = {"name": f"{tool.NAME} counters", "ok": False, "message": None,
                           "command": tool.PROBE_COMMAND}
    why = tool.unavailable(target)
    if why:
        row["message"] = why
        return row
    with tempfile.TemporaryDirectory(prefix="kforge-doctor-counters-") as folder:
        problem = Path(folder) / "doctor_probe.py"
        problem.write_text(_PROBE_PROBLEM)
        spec = load_spec(problem)
        got = tool.collect(spec, spec.baseline, target, Path(folder) / "out", "probe", timeout_s=timeout)
    if got.get("available") and got.get("kernels"):
        top = got["kernels"][0]
        row["ok"] = True
        row["message"] = (f"{tool.NAME} read {len(top)} counters of the probe kernel "
                          f"({top.get('duration_us', 0):.1f} us) inside the sandbox in {got.get('wall_s', 0):.1f} s")
    else:
        row["message"] = got.get("reason") or f"{tool.NAME} returned no kernels"
    return row


def _run_group(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run in its own process group; on timeout kill the whole group. (returncode or None, output)."""
    with tempfile.TemporaryFile() as buf:
        proc = subprocess.Popen(argv, stdout=buf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            rc = None
        buf.seek(0)
        return rc, buf.read().decode("utf-8", "replace")


def _tail(text: str, n: int) -> str:
    flat = " ".join(text.strip().split())
    return flat if len(flat) <= n else "..." + flat[-n:]


# ---------------------------------------------------------------------------------------------
# Measurements (child side: imports torch)


def quick_default() -> bool:
    return os.environ.get(QUICK_ENV, "") not in ("", "0", "false", "no")


def _sizes(kind: str, quick: bool) -> dict[str, int]:
    gpu = kind in ("cuda", "xpu", "mps")
    if quick:
        return {"copy_bytes": 8 << 20, "matmul_n": 256, "reps": 5, "warmup": 2}
    if gpu:
        return {"copy_bytes": 1 << 30, "matmul_n": 8192, "reps": 20, "warmup": 3}
    return {"copy_bytes": 256 << 20, "matmul_n": 2048, "reps": 7, "warmup": 2}


def _timer(torch: Any, kind: str) -> tuple[Callable[[Callable[[], Any]], float], str]:
    """A function timing one call in seconds, and how it times (device events where there are any)."""
    if kind in ("cuda", "xpu"):
        mod = getattr(torch, kind)
        if hasattr(mod, "Event"):
            def timed(fn: Callable[[], Any]) -> float:
                start, end = mod.Event(enable_timing=True), mod.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                return start.elapsed_time(end) / 1e3
            return timed, f"torch.{kind}.Event pairs"

    def sync() -> None:
        if kind in ("cuda", "xpu"):
            getattr(torch, kind).synchronize()
        elif kind == "mps":
            torch.mps.synchronize()

    def timed_host(fn: Callable[[], Any]) -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t0
    return timed_host, "host clock around a synchronized call"


def _median_time(timed: Callable[[Callable[[], Any]], float], fn: Callable[[], Any], warmup: int, reps: int) -> dict[str, Any]:
    for _ in range(warmup):
        timed(fn)
    samples = [timed(fn) for _ in range(reps)]
    med = statistics.median(samples)
    return {"median_s": med, "min_s": min(samples), "max_s": max(samples), "reps": reps}


def _device_info(torch: Any, kind: str) -> dict[str, Any]:
    if kind == "cuda":
        p = torch.cuda.get_device_properties(0)
        return {"name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
                "capability": "%d.%d" % torch.cuda.get_device_capability(0),
                "memory_gb": round(p.total_memory / 1e9, 1), "sm_count": p.multi_processor_count,
                "l2_cache_mb": round(getattr(p, "L2_cache_size", 0) / 2**20, 1) or None}
    if kind == "xpu":
        p = torch.xpu.get_device_properties(0)
        info: dict[str, Any] = {"name": torch.xpu.get_device_name(0), "count": torch.xpu.device_count(),
                                "memory_gb": round(getattr(p, "total_memory", 0) / 1e9, 1) or None}
        for attr in ("driver_version", "gpu_eu_count", "gpu_subslice_count", "max_compute_units",
                     "max_work_group_size", "sub_group_sizes", "has_fp64", "has_bfloat16_conversions",
                     "has_subgroup_matrix_multiply_accumulate", "has_subgroup_2d_block_io"):
            if hasattr(p, attr):
                v = getattr(p, attr)
                info[attr] = list(v) if isinstance(v, (list, tuple)) else v
        return info
    if kind == "mps":
        return {"name": f"Apple MPS ({platform.machine()})", "count": 1}
    return {"name": cpu_model(), "count": 1, "logical_cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()}


def _resolve_kind(torch: Any, requested: str) -> tuple[str | None, dict[str, bool], str | None]:
    avail = {
        "cuda": bool(torch.cuda.is_available()),
        "xpu": bool(hasattr(torch, "xpu") and torch.xpu.is_available()),
        "mps": bool(torch.backends.mps.is_available()),
        "cpu": True,
    }
    if requested == "auto":
        for k in ("cuda", "xpu", "mps", "cpu"):
            if avail[k]:
                return k, avail, None
    if avail.get(requested):
        return requested, avail, None
    why = {
        "cuda": f"torch.cuda.is_available() is False (torch {torch.__version__}, built for CUDA "
                f"{torch.version.cuda or 'none: a CPU-only build'}); check nvidia-smi and the torch wheel",
        "xpu": f"torch.xpu.is_available() is False (torch {torch.__version__}, XPU build "
               f"{getattr(torch.version, 'xpu', None) or 'none'}); install the Intel GPU driver and torch from PyTorch's xpu index",
        "mps": "torch.backends.mps.is_available() is False (needs Apple silicon and macOS 12.3+)",
    }[requested]
    return None, avail, f"no {requested} device: {why}"


def _measure_copy(torch: Any, kind: str, device: Any, sz: dict[str, int], timed: Any) -> dict[str, Any]:
    n = sz["copy_bytes"] // 4
    if kind == "cuda":  # leave room: at most an eighth of device memory per buffer
        n = min(n, torch.cuda.get_device_properties(0).total_memory // 32)
    src = torch.empty(n, dtype=torch.float32, device=device).fill_(1.5)
    dst = torch.empty_like(src)
    t = _median_time(timed, lambda: dst.copy_(src), sz["warmup"], sz["reps"])
    nbytes = 2 * n * 4  # one read and one write per element
    if not bool(torch.equal(dst, src)):
        raise RuntimeError("the copy produced a wrong result")
    del src, dst
    return {**t, "bytes": nbytes, "gbs": nbytes / t["median_s"] / 1e9}


_DTYPES = {"cpu": ("fp32",), "cuda": ("bf16", "fp16", "tf32", "fp32"), "xpu": ("bf16", "fp16", "fp32"),
           "mps": ("fp16", "fp32")}


def _measure_matmul(torch: Any, device: Any, prec: str, n: int, sz: dict[str, int], timed: Any) -> dict[str, Any]:
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}[prec]
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if prec == "tf32" else "highest")
    try:
        gen = torch.Generator(device="cpu").manual_seed(0)
        a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
        b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
        out = torch.empty(n, n, device=device, dtype=dtype)
        t = _median_time(timed, lambda: torch.matmul(a, b, out=out), sz["warmup"], sz["reps"])
        # A matmul that skipped the work would look fast: spot-check one row against float64.
        row = (a[:1].double().cpu() @ b.double().cpu()).flatten()
        got = out[:1].double().cpu().flatten()
        rel = float((got - row).abs().max() / row.abs().max())
        if not rel < {"bf16": 5e-2, "fp16": 1e-2, "tf32": 1e-2, "fp32": 1e-4}[prec]:
            raise RuntimeError(f"the matmul result is wrong (max relative error {rel:.2e})")
    finally:
        torch.set_float32_matmul_precision(previous)
    flops = 2 * n ** 3
    return {**t, "n": n, "flops": flops, "tflops": flops / t["median_s"] / 1e12, "max_rel_error": rel}


def _probe_profiler(torch: Any, kind: str, device: Any) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    activity = {"cuda": "CUDA", "xpu": "XPU"}.get(kind)
    acts = [ProfilerActivity.CPU] + ([getattr(ProfilerActivity, activity)] if activity else [])
    row: dict[str, Any] = {"name": "torch.profiler", "activities": ["CPU"] + ([activity] if activity else []),
                           "ok": False, "message": None}
    x = torch.randn(256, 256, device=device)
    with profile(activities=acts) as prof:
        for _ in range(3):
            y = x @ x
        if kind in ("cuda", "xpu"):
            getattr(torch, kind).synchronize()
    del y
    events = prof.key_averages()
    if activity:
        dev = [e for e in events if getattr(e, "self_device_time_total", 0) > 0]
        row["ok"] = bool(dev)
        row["message"] = (f"{activity} activity recorded {len(dev)} device kernels" if dev else
                          f"{activity} activity recorded no device time (CUPTI/PTI missing or blocked?)")
    else:
        mm = [e for e in events if e.key in ("aten::mm", "aten::matmul") and e.cpu_time_total > 0]
        row["ok"] = bool(mm)
        row["message"] = "CPU activity recorded aten::mm" if mm else "CPU activity recorded no matmul"
        if kind == "mps":
            row["message"] += " (no device-side activity for MPS in torch.profiler)"
    return row


def measure(requested: str, quick: bool) -> dict[str, Any]:
    """Child-side: everything that needs torch. Each piece that fails records its error."""
    import torch

    result: dict[str, Any] = {"software": {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                                           "torch_xpu": getattr(torch.version, "xpu", None),
                                           "python": platform.python_version()}}
    try:
        import triton  # noqa: PLC0415 - optional
        result["software"]["triton"] = triton.__version__
    except Exception as exc:  # ImportError, or a broken install
        result["software"]["triton"] = None
        result["software"]["triton_error"] = f"{exc.__class__.__name__}: {exc}"[:200]

    kind, avail, why = _resolve_kind(torch, requested)
    result["available"] = avail
    result["target"] = kind
    if kind is None:
        result["error"] = why
        return result
    device = torch.device(kind, 0) if kind in ("cuda", "xpu") else torch.device(kind)
    result["device"] = _device_info(torch, kind)
    sz = _sizes(kind, quick)
    timed, how = _timer(torch, kind)
    result["method"] = {"timer": how, "quick": quick, **sz,
                        "statistic": "median of reps after warm-up", "copy": "dst.copy_(src), float32, bytes read + written",
                        "matmul": "torch.matmul(a, b, out=c), square, 2*n^3 FLOP"}
    if kind == "cpu":
        result["method"]["torch_threads"] = torch.get_num_threads()

    measurements: dict[str, Any] = {}
    try:
        measurements["copy"] = _measure_copy(torch, kind, device, sz, timed)
    except Exception as exc:  # a measurement failing is a finding, not a crash
        measurements["copy"] = {"error": f"{exc.__class__.__name__}: {exc}"[:300]}
    matmul: dict[str, Any] = {}
    for prec in _DTYPES[kind]:
        try:
            matmul[prec] = _measure_matmul(torch, device, prec, sz["matmul_n"], sz, timed)
        except Exception as exc:
            matmul[prec] = {"error": f"{exc.__class__.__name__}: {exc}"[:300]}
    measurements["matmul"] = matmul
    result["measurements"] = measurements
    try:
        result["profiler"] = _probe_profiler(torch, kind, device)
    except Exception as exc:
        result["profiler"] = {"name": "torch.profiler", "ok": False, "message": f"{exc.__class__.__name__}: {exc}"[:300]}
    return result


# ---------------------------------------------------------------------------------------------
# Parent: run the child, compare, report


def run_child(requested: str, quick: bool, timeout: float) -> dict[str, Any]:
    """Run `measure` in a child process; a crash or hang becomes an `error` entry."""
    with tempfile.TemporaryDirectory(prefix="kforge-doctor-") as tmp:
        out = Path(tmp) / "measure.json"
        argv = [sys.executable, "-m", "kforge_bot.doctor", "measure", "--target", requested, "--out", str(out)]
        if quick:
            argv.append("--quick")
        started = time.monotonic()
        rc, text = _run_group(argv, timeout)
        elapsed = time.monotonic() - started
        if rc is None:
            return {"error": f"the measurement child did not finish within {timeout:g} s and was killed "
                             f"(a hung driver or device?); last output: {_tail(text, 300)}"}
        if rc != 0 or not out.is_file():
            sig = f" (signal {-rc}: {signal.Signals(-rc).name})" if rc < 0 and -rc in signal.valid_signals() else ""
            return {"error": f"the measurement child failed with exit status {rc}{sig}; output: {_tail(text, 400)}"}
        data = json.loads(out.read_text())
        data["child_seconds"] = round(elapsed, 2)
        return data


_SANDBOX_PROBE = """
import sys, torch
kind = sys.argv[1]
if kind in ("cuda", "xpu"):
    x = torch.ones(1 << 20, device=kind)
    assert float((x * 2).sum()) == 2 * (1 << 20)
print("KFORGE_SANDBOX_OK", torch.__version__)
"""


def probe_sandbox(kind: str, timeout: float = 180.0) -> dict[str, Any]:
    """Whether workers can be sandboxed here, and whether torch (and the device) work inside the sandbox."""
    from kforge_bot.evaluate import isolation
    from kforge_bot.evaluate.sandbox import scrubbed_environment

    status = isolation.probe()
    out: dict[str, Any] = {"name": "sandbox", "available": status.available, "tool": status.tool, "ok": False,
                           "message": status.describe()}
    if not status.available:
        out["hint"] = status.hint
        return out
    with tempfile.TemporaryDirectory(prefix="kforge-doctor-sandbox-") as scratch:
        view = isolation.View(scratch=Path(scratch), devices=kind)
        argv = isolation.command([sys.executable, "-c", _SANDBOX_PROBE, kind], view)
        env = isolation.environment(scrubbed_environment(), Path(scratch))
        started = time.monotonic()
        rc, text = _run_group(argv, timeout, env=env)
        out["seconds"] = round(time.monotonic() - started, 2)
    if rc == 0 and "KFORGE_SANDBOX_OK" in text:
        out["ok"] = True
        out["message"] = f"{status.tool}: torch" + (f" and the {kind} device" if kind in ("cuda", "xpu") else "") + \
            " work inside the sandbox"
    else:
        out["message"] = f"{status.tool} starts, but torch{' or the device' if kind != 'cpu' else ''} fails inside " \
                         f"it (exit status {rc}): {_tail(text, 300)}"
    return out


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
    from kforge_bot.errors import KforgeError

    if report.get("quick"):
        raise KforgeError("refusing to save quick-mode figures as ceilings", hint="run `kforge-bot doctor --save` without --quick")
    if not report.get("ceilings"):
        raise KforgeError("nothing measured to save", hint="see the missing pieces in the doctor report")
    return hardware.save_ceilings(report["ceilings"], path)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kforge_bot.doctor")
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="measure this machine (the child half of `kforge-bot doctor`)")
    m.add_argument("--target", choices=TARGET_CHOICES, default="auto")
    m.add_argument("--quick", action="store_true", default=quick_default())
    m.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result = measure(args.target, args.quick)
    Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
