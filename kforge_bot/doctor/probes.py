"""The parent's probes (subprocesses only, never torch): tools on PATH, perf counters, hardware counters
and the workers' sandbox. Each returns a row of plain data (what works, and a message)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kforge_bot.counters.counter_tools import tool_for
from kforge_bot.environment import scrubbed_environment
from kforge_bot.evaluate import bytecode, forked, isolation
from kforge_bot.evaluate.sandbox import kill_group
from kforge_bot.kernelspec import TARGET_KINDS, load_spec
from kforge_bot.text import one_line_tail

# ---------------------------------------------------------------------------------------------
# Tools

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
    "cc": (["cc", "--version"], TARGET_KINDS,
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
        out["message"] = f"exit status {proc.returncode}: {one_line_tail(text, 200)}"
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
    return False, f"perf stat failed (exit status {returncode}): {one_line_tail(output, 200)}"


def probe_perf_counters() -> dict[str, Any]:
    perf = shutil.which("perf")
    row: dict[str, Any] = {"name": "perf counters", "ok": False, "message": "perf not found on PATH",
                           "command": "perf stat -x, -e instructions,cycles true"}
    if perf:
        true = shutil.which("true") or "/bin/true"
        rc, out = run_group([perf, "stat", "-x,", "-e", "instructions,cycles", true], 30)
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
    on CUDA (kforge_bot.counters.ncu), unitrace on Intel XPU (kforge_bot.counters.unitrace). Tells whether
    counters are readable here, and what it costs."""
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


def run_group(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run in its own process group; on timeout kill the whole group. (returncode or None, output)."""
    with tempfile.TemporaryFile() as buf:
        proc = subprocess.Popen(argv, stdout=buf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.wait()
            rc = None
        buf.seek(0)
        return rc, buf.read().decode("utf-8", "replace")



_SANDBOX_PROBE = """
import sys, torch
kind = sys.argv[1]
if kind in ("cuda", "xpu"):
    x = torch.ones(1 << 20, device=kind)
    assert float((x * 2).sum()) == 2 * (1 << 20)
print("KFORGE_SANDBOX_OK", torch.__version__)
"""


def _worker_start(view: isolation.View, base_env: dict[str, str]) -> str:
    """How evaluations will start their workers here: forked from the forkserver (its own probe sandbox made), or
    afresh in bubblewrap, and why."""
    if not forked.usable(forked.ENTRY, view, view.devices):
        return "workers start afresh in bubblewrap (the forkserver is for sandboxed CPU workers)"
    server = forked.server_for(base_env, view.bytecode)
    if server is None:
        return "workers start afresh in bubblewrap (the forkserver's own sandbox failed: see above)"
    return "workers are forked from the forkserver, which imported torch once (evaluate.forked)"


def probe_sandbox(kind: str, timeout: float = 180.0) -> dict[str, Any]:
    """Whether workers can be sandboxed here, and whether torch (and the device) work inside the sandbox."""
    status = isolation.probe()
    out: dict[str, Any] = {"name": "sandbox", "available": status.available, "tool": status.tool, "ok": False,
                           "message": status.describe()}
    if not status.available:
        out["hint"] = status.hint
        return out
    # The workers' bytecode as evaluations will have it (filled here on first use: doctor readies the machine).
    compiled = bytecode.for_workers(scrubbed_environment())
    out["bytecode"] = compiled.describe()
    with tempfile.TemporaryDirectory(prefix="kforge-doctor-sandbox-") as scratch:
        view = isolation.View(scratch=Path(scratch), devices=kind, bytecode=compiled.directory)
        argv = isolation.command([sys.executable, "-c", _SANDBOX_PROBE, kind], view)
        env = isolation.environment(scrubbed_environment(), view)
        started = time.monotonic()
        rc, text = run_group(argv, timeout, env=env)
        out["seconds"] = round(time.monotonic() - started, 2)
    if rc == 0 and "KFORGE_SANDBOX_OK" in text:
        out["ok"] = True
        out["message"] = f"{status.tool}: torch" + (f" and the {kind} device" if kind in ("cuda", "xpu") else "") + \
            f" work inside the sandbox ({out['seconds']} s; torch's bytecode: {compiled.source}); " + \
            _worker_start(view, scrubbed_environment())
    else:
        out["message"] = f"{status.tool} starts, but torch{' or the device' if kind != 'cpu' else ''} fails inside " \
                         f"it (exit status {rc}): {one_line_tail(text, 300)}"
    return out

