"""Reading Nsight Compute's output into the per-kernel digest the analyst, the tuner and the report use.

The collector runs `ncu --csv --page raw --print-units base --metrics <ncu_metrics.all_metric_names()>`;
its captured text mixes ncu's `==PROF==` / `==WARNING==` lines and the program's own prints with one CSV:
a header row, a units row, then one row per profiled kernel. `parse_raw` turns each kernel row into a flat
dict keyed by `Metric.key` (plus the launch shape, the top stall reasons, the occupancy limiter and the
spill count); the rest of the module derives from those dicts: a roofline class, the speed of light, a
summary, a markdown table and a flat CSV. Pure: no subprocess, no torch, nothing read from disk.

A counter ncu did not report (or reported as text) is left out of the row, never set to 0: a missing
number must not read as a measured zero.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from kforge_bot.counters.ncu_metrics import METRICS, STALL_REASONS, stall_metric
from kforge_bot.text import markdown_cell, markdown_text

SOL_FLOOR = 0.6  # a unit at >= 60% of its peak is the bottleneck (ncu's own SOL rule of thumb)
UNDER_OCCUPIED_PCT = 25.0  # under a quarter of the warp slots resident, latency cannot be hidden
MIN_WAVES = 1.0  # a grid under one wave leaves SMs idle however good the kernel is
TOP_STALLS = 3  # the digest keeps this many stall reasons per kernel
KERNEL_CHARS = 40  # kernel names in the table are clipped to this (templated names run to kilobytes)

PERMISSION_CODE = "ERR_NVGPUCTRPERM"

# The four launch limits, in tie-break order; the smallest is what caps theoretical occupancy.
_LIMITERS: tuple[tuple[str, str], ...] = (
    ("registers", "occupancy_limit_registers"),
    ("shared_mem", "occupancy_limit_shared_mem"),
    ("warps", "occupancy_limit_warps"),
    ("blocks", "occupancy_limit_blocks"),
)
# ncu's unit names (base and scaled) to the digest's units: time to microseconds, sizes to bytes. Time is
# (multiply, divide) so that 30,592 ns is exactly 30.592 us (a factor of 1e-3 would leave 30.592000000000002).
_TO_US = {"ns": (1.0, 1e3), "nsecond": (1.0, 1e3), "us": (1.0, 1.0), "usecond": (1.0, 1.0), "ms": (1e3, 1.0),
          "msecond": (1e3, 1.0), "s": (1e6, 1.0), "second": (1e6, 1.0)}
_TO_BYTES = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kibyte": 1024.0, "mibyte": 1024.0**2,
             "gibyte": 1024.0**3}


class NcuOutputError(ValueError):
    """ncu's captured output holds no CSV to read (it failed, or profiled nothing)."""


def permission_problem(text: str) -> str | None:
    """A one-line explanation and fix when ncu was refused the performance counters, else None."""
    if PERMISSION_CODE not in text:
        return None
    return (f"{PERMISSION_CODE}: this user may not read the GPU's performance counters; load the NVIDIA driver "
            "with NVreg_RestrictProfilingToAdminUsers=0 (e.g. `options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
            "in a file under /etc/modprobe.d, then reboot), or run the runner's profiling as an admin "
            "(root or CAP_SYS_ADMIN); see https://developer.nvidia.com/ERR_NVGPUCTRPERM")


def _problem_line(text: str) -> str | None:
    """ncu's own explanation of a run that produced no CSV: its first ==ERROR== line, else 'no kernels'."""
    lines = [line.strip() for line in text.splitlines()]
    for line in lines:
        if line.startswith("==ERROR=="):
            return line
    for line in lines:
        if line.startswith("==WARNING==") and "No kernels were profiled" in line:
            return line
    return None


def _csv_block(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        problem = _problem_line(text)
        message = "ncu printed no CSV (no line starting with \"ID\")"
        if problem:
            message += f": {problem}"
        hint = permission_problem(text)
        if hint:
            message += f" -- {hint}"
        raise NcuOutputError(message)
    block: list[str] = []
    for line in lines[start:]:
        if not line.startswith('"'):  # the CSV ends where ncu's or the program's plain lines resume
            break
        block.append(line)
    return list(csv.reader(block))


def _number(cell: str | None) -> float | None:
    if cell is None:
        return None
    cell = cell.strip().replace(",", "")  # ncu prints thousands separators: "1,398,234.67"
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:  # "n/a", enum values such as "PolicySpread"
        return None


def _convert(value: float, ncu_unit: str, digest_unit: str) -> float:
    unit = ncu_unit.strip().lower()
    if digest_unit == "us":
        # No unit row: the collector asks for base units, and ncu's base unit for time is ns.
        multiply, divide = _TO_US.get(unit or "ns", (1.0, 1.0))
        return value * multiply / divide
    if digest_unit == "B":
        return value * _TO_BYTES.get(unit.split("/")[0], 1.0)  # "byte/block" is still bytes
    return value


def _stalls(cells: dict[str, str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for reason, why in STALL_REASONS:
        if reason == "selected":  # the warp issued: not a stall
            continue
        ratio = _number(cells.get(stall_metric(reason)))
        if ratio is not None and ratio > 0:  # a zero ratio is no reason at all
            found.append({"reason": reason, "ratio": ratio, "why": why})
    found.sort(key=lambda s: -s["ratio"])  # stable: ties keep STALL_REASONS' order
    return found[:TOP_STALLS]


def _kernel_row(cells: dict[str, str], units: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {"kernel": cells.get("Kernel Name", ""), "block": cells.get("Block Size", ""),
                           "grid": cells.get("Grid Size", "")}
    stream = _number(cells.get("Stream"))
    if stream is not None and stream.is_integer():
        row["stream"] = int(stream)
    for metric in METRICS:
        value = _number(cells.get(metric.ncu))
        if value is not None:
            row[metric.key] = _convert(value, units.get(metric.ncu, ""), metric.unit)
    stalls = _stalls(cells)
    if stalls:
        row["stalls"] = stalls
    limits = [(name, row[key]) for name, key in _LIMITERS if key in row]
    if len(limits) == len(_LIMITERS):  # with one limit unknown the smallest of the rest proves nothing
        row["occupancy_limiter"] = min(limits, key=lambda item: item[1])[0]  # min keeps the first of ties
    if "local_load_instructions" in row and "local_store_instructions" in row:
        row["spills"] = row["local_load_instructions"] + row["local_store_instructions"]
    return row


def parse_raw(text: str) -> list[dict[str, Any]]:
    """One digest dict per kernel row of ncu's `--csv --page raw` output (mixed with other lines)."""
    table = _csv_block(text)
    header, body = table[0], table[1:]
    units: dict[str, str] = {}
    if body and body[0] and not body[0][0].strip():  # the units row has no ID
        units = dict(zip(header, body[0]))
        body = body[1:]
    return [_kernel_row(dict(zip(header, cells)), units) for cells in body if any(c.strip() for c in cells)]


def classify(row: dict[str, Any], floor_ratio: float = SOL_FLOOR) -> str:
    """The roofline class of one kernel: memory-bound, compute-bound, under-occupied or latency-bound.

    A unit is the bound when it is at or above `floor_ratio` of its peak and ahead of the other (a tie goes
    to memory: both saturated, and memory is what the hardware floor measures). Neither at its peak, the
    kernel is under-occupied when too few warps are resident or the grid is under one wave, else
    latency-bound. "unknown" when the row has no throughput and no occupancy counter to judge from.
    """
    floor = floor_ratio * 100.0
    memory, sm = row.get("memory_throughput_pct"), row.get("sm_throughput_pct")
    if memory is not None and memory >= floor and (sm is None or memory >= sm):
        return "memory-bound"
    if sm is not None and sm >= floor and (memory is None or sm > memory):
        return "compute-bound"
    occupancy, waves = row.get("achieved_occupancy_pct"), row.get("waves_per_sm")
    if (occupancy is not None and occupancy < UNDER_OCCUPIED_PCT) or (waves is not None and waves < MIN_WAVES):
        return "under-occupied"
    if memory is None and sm is None and occupancy is None and waves is None:
        return "unknown"
    return "latency-bound"


def speed_of_light(row: dict[str, Any]) -> float | None:
    """The busier of compute and memory against its peak, as a fraction (1.0 = at the hardware's limit)."""
    values = [row[key] for key in ("sm_throughput_pct", "memory_throughput_pct") if row.get(key) is not None]
    return max(values) / 100.0 if values else None


def _longest_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Rows without a duration sort last rather than being dropped: they still ran.
    return sorted(rows, key=lambda r: -r["duration_us"] if r.get("duration_us") is not None else float("inf"))


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The kernels longest first, their total time, and the longest one's name, class and speed of light."""
    kernels = _longest_first(rows)
    total = sum(r["duration_us"] for r in kernels if r.get("duration_us") is not None)
    longest = kernels[0] if kernels else None
    return {"kernels": kernels, "total_us": total,
            "dominant": longest["kernel"] if longest else None,
            "class": classify(longest) if longest else None,
            "speed_of_light": speed_of_light(longest) if longest else None}


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if digits == 0:
        return str(round(value))  # round() of a float with no digits is an int
    return f"{value:,.{digits}f}"


def _kernel_cell(name: str) -> str:
    # One line, cut, and as text: a candidate names its own kernels (`foo<float>` would render as HTML).
    name = " ".join(name.split())
    name = name if len(name) <= KERNEL_CHARS else name[: KERNEL_CHARS - 1] + "…"
    return markdown_cell(markdown_text(name))


def _table_row(row: dict[str, Any]) -> list[str]:
    stalls = row.get("stalls") or []
    top = f"{stalls[0]['reason']} {stalls[0]['ratio']:.1f}" if stalls else "-"
    return [_kernel_cell(str(row.get("kernel", ""))), _fmt(row.get("duration_us")), _fmt(row.get("dram_throughput_pct")),
            _fmt(row.get("sm_throughput_pct")), _fmt(row.get("achieved_occupancy_pct")),
            _fmt(row.get("registers_per_thread"), 0), _fmt(row.get("spills"), 0), top, classify(row)]


def table(before: list[dict[str, Any]] | None, after: list[dict[str, Any]], limit: int = 6) -> str:
    """A compact markdown table of the longest kernels; with `before`, its rows first, then `after`'s.

    Empty string when there is no kernel to show.
    """
    columns = ["kernel", "time us", "DRAM %", "SM %", "occupancy %", "registers", "spills", "top stall", "class"]
    sides: list[tuple[str, list[dict[str, Any]]]] = [("after", after)]
    if before is not None:
        sides.insert(0, ("before", before))
        columns.insert(0, "side")
    lines: list[list[str]] = []
    for label, rows in sides:
        for row in _longest_first(rows)[:limit]:
            lines.append(([label] if before is not None else []) + _table_row(row))
    if not lines:
        return ""
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return "\n".join(out) + "\n"


def _csv_cell(value: Any) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)  # 18 rather than 18.0; no precision lost
    if isinstance(value, list):  # the stalls
        return ";".join(f"{s['reason']}:{_csv_cell(s['ratio'])}" for s in value)
    return str(value)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """The digest rows as a flat CSV (one column per key any row has), as the report's ncu-details.csv."""
    if not rows:
        return ""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_cell(row[key]) if key in row else "" for key in columns])
    return buffer.getvalue()
