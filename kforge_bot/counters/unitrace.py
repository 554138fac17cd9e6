"""Hardware counters for one call of one implementation on an Intel GPU: unitrace, off the timed path.

The XPU counterpart of kforge_bot.counters.ncu, same contract and same digest shape (`unitrace_parse`):
`collect(spec, implementation, target, out_dir, label)` runs

    unitrace --metric-query --group ComputeBasic --conditional-collection --output-dir-path <scratch>/metrics
             -o <label>.csv python -c <profiled_worker> REQUEST

inside the workers' sandbox. The profiled worker makes one warm call, then one call with PTI_ENABLE_COLLECTION
set to 1 (unitrace's documented switch for --conditional-collection), so only that call's kernels are queried.
ZE_FLAT_DEVICE_HIERARCHY=FLAT is set: unitrace's metric profiling requires the flat hierarchy. The raw CSV is
kept as `<out_dir>/<label>.csv`.

Written to unitrace's documentation and source (intel/pti-gpu, tools/unitrace: README and
src/levelzero/ze_metrics.h); it has not run on an Intel GPU in this project (no Arc B580 was available):
the tests drive it with a stand-in `unitrace` that writes a file in that format. Without unitrace, or when the
driver keeps counters from ordinary users (observation_paranoid), the result says so in one line.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_bot.counters import unitrace_parse
from kforge_bot.counters.profiled_run import profiled_argv, profiled_call
from kforge_bot.evaluate import bound
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec
from kforge_bot.targets import target_kind

NAME, TITLE = "unitrace", "unitrace"
PROBE_COMMAND = "unitrace --metric-query --group ComputeBasic (sandboxed), one call"
TIMEOUT_S = 60.0
METRIC_GROUP = "ComputeBasic"
PARANOID_FILES = ("/proc/sys/dev/xe/observation_paranoid", "/proc/sys/dev/i915/perf_stream_paranoid")


@dataclass(frozen=True)
class UnitraceTool:
    path: str
    folders: tuple[Path, ...]  # its install (bin/ and the lib/ beside it), shown read-only in the sandbox


def find_unitrace() -> UnitraceTool | None:
    path = os.environ.get("KFORGE_UNITRACE") or shutil.which("unitrace")
    if not path or not os.access(path, os.X_OK):
        return None
    real = Path(os.path.realpath(path))
    return UnitraceTool(path=path, folders=(real.parent.parent if real.parent.name == "bin" else real.parent,))


def _paranoid() -> dict[str, str]:
    found = {}
    for path in PARANOID_FILES:
        try:
            found[path] = Path(path).read_text()
        except OSError:
            pass
    return found


def unavailable(target: str) -> str | None:
    """Why counters cannot be collected for `target` here, or None."""
    if target_kind(target) != "xpu":
        return f"unitrace collects counters on Intel GPU (xpu) targets only; not on {target}"
    if find_unitrace() is None:
        return ("unitrace (Intel PTI) is not on PATH: build it from github.com/intel/pti-gpu (tools/unitrace), "
                "or set KFORGE_UNITRACE")
    return unitrace_parse.permission_problem(_paranoid(), is_root=os.geteuid() == 0)


def command(tool: UnitraceTool, request: Path, metrics_dir: Path, label: str) -> list[str]:
    """unitrace's argv for one profiled call; pure."""
    return [tool.path, "--metric-query", "--group", METRIC_GROUP, "--conditional-collection",
            "--output-dir-path", str(metrics_dir), "-o", f"{label}.csv", *profiled_argv(request)]


def collect(spec: KernelSpec, implementation: Implementation, target: str, out_dir: Path, label: str, *,
            settings: EvalSettings | None = None, keep_report: bool = False, timeout_s: float = TIMEOUT_S,
            device_name: str = "", peak_gbs: float | None = None) -> dict[str, Any]:
    """{"available": True, "tool": "unitrace", "kernels", "summary", "raw_file", "wall_s"} or {"available": False,
    "reason"}. unitrace counts bytes, not percentages of peak: the device's DRAM bandwidth is `peak_gbs`, else
    the most generous one known for `device_name` (runner facts or doctor's, kforge_bot.evaluate.bound). Never
    raises for unitrace's or the implementation's failures. (`keep_report` is accepted for the same call as
    ncu's: unitrace's CSV is its whole report.)"""
    why = unavailable(target)
    if why:
        return {"available": False, "reason": why}
    tool = find_unitrace()
    assert tool is not None
    out_dir.mkdir(parents=True, exist_ok=True)
    if peak_gbs is None and device_name:
        known = bound.peak_bandwidth_gbs("xpu", device_name)
        peak_gbs = known[0] if known else None

    def argv(request: Path, work: Path) -> list[str]:
        (work / "metrics").mkdir(exist_ok=True)
        return command(tool, request, work / "metrics", label)

    with profiled_call(spec, implementation, target, settings or EvalSettings(), tool_argv=argv,
                       tool_folders=tool.folders, extra_env={"ZE_FLAT_DEVICE_HIERARCHY": "FLAT"},
                       timeout_s=timeout_s) as run:
        written = sorted((run.work / "metrics").glob(f"{label}*.csv"))  # unitrace adds the pid: <label>.<pid>.csv
        text = "\n".join(path.read_text(encoding="utf-8", errors="replace")[: 16 << 20] for path in written)
        (out_dir / f"{label}.csv").write_text(text, encoding="utf-8")
        failed = run.failure("unitrace", timeout_s)
        if failed:
            return failed
        if not written:
            last = next((ln.strip() for ln in reversed(run.text.splitlines()) if ln.strip()), "no output")
            return {"available": False, "reason": f"unitrace wrote no metric file ({last[:200]})", "wall_s": run.wall_s}
        return run.counters(NAME, label, lambda: unitrace_parse.parse_query(text, peak_gbs),
                            unitrace_parse.UnitraceOutputError)
