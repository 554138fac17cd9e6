"""Reading unitrace's per-kernel metric query (Intel GPUs) into the digest rows `ncu_parse` describes.

The collector runs `unitrace --metric-query --group ComputeBasic --conditional-collection ...` (Intel's PTI
tool, github.com/intel/pti-gpu, tools/unitrace), which writes `<name>.<pid>.csv`: per device a header line
`Kernel,GlobalInstanceId,SubDeviceId,<metric>[<unit>],...` (a legacy build precedes it with `=== Device #N
Metrics ===`), then one line per kernel instance and sub-device, blocks separated by blank lines. Kernel names
are quoted and carry the launch shape, e.g. `"softmax_kernel[SIMD32 {8192; 1; 1} {128; 1; 1}]"` (global and
work-group sizes).

The rows use the keys of the CUDA digest wherever a counter means the same thing, so the summary, the roofline
class, the table, the analyst's prompt and the tuner read both alike:

| digest key | from (ComputeBasic) | note |
|---|---|---|
| duration_us | GpuTime[ns] | |
| dram_read_bytes, dram_write_bytes | GPU_MEMORY_BYTE_READ / _WRITE [bytes] | |
| dram_throughput_pct, memory_throughput_pct | those bytes over the time, against the device's peak bandwidth | only when the peak is known (runner facts or doctor); unitrace reports no percentage of peak |
| sm_throughput_pct | the busiest of XVE_INST_EXECUTED_{ALU0,ALU1,ALU2,XMX}_ALL_UTILIZATION[%] | as ncu's SM throughput is its busiest pipe's |
| achieved_occupancy_pct | XVE_THREADS_OCCUPANCY_ALL[%] | |
| l2_hit_rate_pct | L3_HIT / (L3_HIT + L3_MISS) | Intel's L3 is the last-level cache, NVIDIA's L2 |
| l1_hit_rate_pct | LOAD_STORE_CACHE_HIT / LOAD_STORE_CACHE_ACCESS | |
| grid_size, block_size, simd_width | the kernel name's `[SIMDn {global} {local}]` | work-items, not blocks: grid_size / block_size work-groups |
| xve_active_pct, xve_stall_pct, gpu_frequency_mhz | XVE_ACTIVE, XVE_STALL, AvgGpuCoreFrequencyMHz | Intel's own; no CUDA equivalent |

Registers, spills and stall reasons are not in the query (unitrace's --device-timing and --stall-sampling
report them): those keys stay absent, never 0. Pure: no subprocess, nothing read from disk.
"""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

HEADER_START = "Kernel,GlobalInstanceId"
_SHAPE = re.compile(r"\[SIMD(\d+)\s*\{([^}]*)\}\s*\{([^}]*)\}\]\s*$")
_PIPES = ("XVE_INST_EXECUTED_ALU0_ALL_UTILIZATION", "XVE_INST_EXECUTED_ALU1_ALL_UTILIZATION",
          "XVE_INST_EXECUTED_ALU2_ALL_UTILIZATION", "XVE_INST_EXECUTED_XMX_ALL_UTILIZATION")


class UnitraceOutputError(ValueError):
    """The file holds no metric rows to read (unitrace failed, or the profiled call ran no kernel)."""


def _name_and_unit(column: str) -> tuple[str, str]:
    column = column.strip()
    match = re.fullmatch(r"(.*?)\[(.*)\]", column)
    return (match.group(1), match.group(2)) if match else (column, "")


def _number(cell: str) -> float | None:
    try:
        value = float(cell.strip().replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _shape(kernel: str) -> tuple[str, dict[str, Any]]:
    """The kernel's name without its launch suffix, and the shape the suffix gives."""
    match = _SHAPE.search(kernel)
    if not match:
        return kernel, {}

    def product(dims: str) -> int | None:
        values = [_number(d) for d in dims.split(";")]
        return math.prod(int(v) for v in values) if values and all(v is not None for v in values) else None

    shape = {"simd_width": int(match.group(1)), "grid_size": product(match.group(2)),
             "block_size": product(match.group(3))}
    return kernel[: match.start()].strip(), {k: v for k, v in shape.items() if v is not None}


def _row(cells: dict[str, str], peak_gbs: float | None) -> dict[str, Any]:
    values: dict[str, float] = {}
    for column, cell in cells.items():
        number = _number(cell)
        if number is not None:
            values[_name_and_unit(column)[0]] = number
    name, shape = _shape(cells.get("Kernel", "").strip().strip('"'))
    row: dict[str, Any] = {"kernel": name, **shape}
    if "GpuTime" in values:
        row["duration_us"] = values["GpuTime"] / 1000.0
    for key, metric in (("dram_read_bytes", "GPU_MEMORY_BYTE_READ"), ("dram_write_bytes", "GPU_MEMORY_BYTE_WRITE"),
                        ("achieved_occupancy_pct", "XVE_THREADS_OCCUPANCY_ALL"), ("xve_active_pct", "XVE_ACTIVE"),
                        ("xve_stall_pct", "XVE_STALL"), ("gpu_frequency_mhz", "AvgGpuCoreFrequencyMHz")):
        if metric in values:
            row[key] = values[metric]
    moved = [row[k] for k in ("dram_read_bytes", "dram_write_bytes") if k in row]
    if peak_gbs and moved and row.get("duration_us"):
        achieved_gbs = sum(moved) / (row["duration_us"] * 1e3)  # bytes per ns = GB/s
        row["dram_throughput_pct"] = row["memory_throughput_pct"] = 100.0 * achieved_gbs / peak_gbs
    pipes = [values[p] for p in _PIPES if p in values]
    if pipes:
        row["sm_throughput_pct"] = max(pipes)
    for key, hit, miss_or_all, is_total in (("l2_hit_rate_pct", "L3_HIT", "L3_MISS", False),
                                            ("l1_hit_rate_pct", "LOAD_STORE_CACHE_HIT", "LOAD_STORE_CACHE_ACCESS", True)):
        if hit in values and miss_or_all in values:
            total = values[miss_or_all] if is_total else values[hit] + values[miss_or_all]
            if total > 0:
                row[key] = 100.0 * values[hit] / total
    return row


def parse_query(text: str, peak_gbs: float | None = None) -> list[dict[str, Any]]:
    """One digest row per kernel instance (sub-device 0's sample where a device has several). `peak_gbs`: the
    device's DRAM bandwidth, for the percentages of peak. Raises UnitraceOutputError when no row is found."""
    rows: list[dict[str, Any]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("==="):
            continue
        if line.startswith(HEADER_START):
            header = [c.strip() for c in next(csv.reader([line]))]
            continue
        if header is None:
            continue  # unitrace's own messages before the first header
        cells = dict(zip(header, next(csv.reader(io.StringIO(line), skipinitialspace=True))))
        if cells.get("SubDeviceId", "0").strip() not in ("", "0"):
            continue
        rows.append(_row(cells, peak_gbs))
    if not rows:
        raise UnitraceOutputError("unitrace's metric query holds no kernel rows (did the profiled call run a kernel "
                                  "on the Intel GPU?)")
    return rows


def permission_problem(paranoid: dict[str, str], is_root: bool) -> str | None:
    """A one-line explanation and fix when the driver keeps the GPU's counters from ordinary users, else None.
    `paranoid`: the contents of the observation sysctls that exist (xe: /proc/sys/dev/xe/observation_paranoid,
    i915: /proc/sys/dev/i915/perf_stream_paranoid); 1 means only root (or CAP_PERFMON) may read the counters."""
    if is_root:
        return None
    for path, value in paranoid.items():
        if value.strip() == "1":
            name = path.replace("/proc/sys/", "").replace("/", ".")
            return (f"{path} is 1: only root may read the Intel GPU's performance counters; allow the runner with "
                    f"`sudo sysctl {name}=0` (and a file under /etc/sysctl.d to keep it), or profile as root")
    return None
