"""Hardware counters for one call of one implementation: Nsight Compute (`ncu`), off the timed path.

`collect(spec, implementation, target, out_dir, label)` runs `ncu` on kforge_bot.counters.profiled_worker (one
warm call, then one call inside an NVTX range, the only kernels profiled) with the fixed metric set of
`ncu_metrics`, inside the same sandbox as every worker that runs user code, and returns the parsed digest
(`ncu_parse`): per kernel duration, SM and memory speed of light, DRAM throughput, occupancy and its limiter,
registers, spills, shared memory, cache hit rates, the top warp stalls and the launch shape. The raw CSV is
kept as `<out_dir>/<label>.csv` (and the `.ncu-rep` when asked).

It never runs beside a timed run (the loop calls it between evaluations) and never decides a verdict. What
it cannot promise: the profiled process is user code, and it shares its sandbox with `ncu` itself, so a
hostile kernel could forge its own counters; they are evidence for the analyst, the tuner and a reviewer,
checked against the harness's own timing (`consistent_with_timing`), never part of a pass.

Without ncu, or without permission to read the counters (ERR_NVGPUCTRPERM), the result says so in one line
and everything else goes on.
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_bot.counters import ncu_parse
from kforge_bot.counters.ncu_metrics import all_metric_names
from kforge_bot.counters.profiled_run import profiled_argv, profiled_call
from kforge_bot.counters.profiled_worker import RANGE
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec
from kforge_bot.targets import target_kind

NAME, TITLE = "ncu", "Nsight Compute"
PROBE_COMMAND = "ncu --clock-control none --metrics <kforge's set> (sandboxed), one call"
TIMEOUT_S = 60.0  # one call, each kernel replayed ~15 times: several times its usual run (ncu_h200.md)


@dataclass(frozen=True)
class NcuTool:
    path: str
    folders: tuple[Path, ...]  # what the sandbox must show for ncu to run: its launcher and its install


def find_ncu() -> NcuTool | None:
    """`ncu` from $KFORGE_NCU or PATH, with the folders it runs from. The `ncu` CUDA puts on PATH is a
    launcher that looks for its nsight-compute install beside the toolkit or under /opt/nvidia."""
    path = os.environ.get("KFORGE_NCU") or shutil.which("ncu")
    if not path or not os.access(path, os.X_OK):
        return None
    real = Path(os.path.realpath(path))
    folders = {real.parent}
    toolkit = real.parent.parent
    folders.update(Path(p) for p in glob.glob(str(toolkit / "nsight-compute*")))
    if Path("/opt/nvidia").is_dir():
        folders.add(Path("/opt/nvidia"))
    return NcuTool(path=path, folders=tuple(sorted(folders)))


def unavailable(target: str) -> str | None:
    """Why counters cannot be collected for `target` here, or None."""
    if target_kind(target) != "cuda":
        return f"hardware counters are collected on CUDA targets only (Nsight Compute); not on {target}"
    if find_ncu() is None:
        return "ncu (Nsight Compute) is not on PATH: install it with the CUDA toolkit, or set KFORGE_NCU"
    return None


def command(tool: NcuTool, request: Path, report: Path | None = None) -> list[str]:
    """ncu's argv for one profiled call; pure."""
    argv = [tool.path, "--clock-control", "none", "--metrics", ",".join(all_metric_names()),
            "--nvtx", "--nvtx-include", f"{RANGE}/", "--target-processes", "all",
            "--csv", "--page", "raw", "--print-units", "base"]
    if report is not None:
        argv += ["--export", str(report), "--force-overwrite"]
    return argv + profiled_argv(request)


def collect(spec: KernelSpec, implementation: Implementation, target: str, out_dir: Path, label: str, *,
            settings: EvalSettings | None = None, keep_report: bool = False,
            timeout_s: float = TIMEOUT_S, device_name: str = "") -> dict[str, Any]:
    """{"available": True, "tool": "ncu", "kernels": [...], "summary": {...}, "raw_file", "wall_s"} or
    {"available": False, "reason": one line}. Never raises for ncu's or the implementation's failures.
    (`device_name` is the collectors' common call: ncu reports percentages of peak itself.)"""
    why = unavailable(target)
    if why:
        return {"available": False, "reason": why}
    tool = find_ncu()
    assert tool is not None
    out_dir.mkdir(parents=True, exist_ok=True)

    def argv(request: Path, work: Path) -> list[str]:
        return command(tool, request, work / f"{label}.ncu-rep" if keep_report else None)

    with profiled_call(spec, implementation, target, settings or EvalSettings(), tool_argv=argv,
                       tool_folders=tool.folders, timeout_s=timeout_s) as run:
        (out_dir / f"{label}.csv").write_text(run.text, encoding="utf-8")
        report = run.work / f"{label}.ncu-rep"
        if keep_report and report.is_file():
            shutil.copy(report, out_dir / report.name)
        failed = run.failure("ncu", timeout_s)
        if failed:
            return failed
        return run.counters(NAME, label, lambda: ncu_parse.parse_raw(run.text), ncu_parse.NcuOutputError)


def consistent_with_timing(counters: dict[str, Any], median_ms: float | None) -> str | None:
    """A note when the profiled kernels' time is far from what the harness timed for the same call (profiled
    under 40% of it: kernels missing from the range, or counters forged), else None."""
    total_us = (counters.get("summary") or {}).get("total_us")
    if not counters.get("available") or not total_us or not median_ms:
        return None
    if total_us < 0.4 * median_ms * 1000.0:
        return (f"the profiled kernels add up to {total_us:.1f} us against {median_ms * 1000.0:.1f} us timed: "
                "read these counters with care")
    return None
