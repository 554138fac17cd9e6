"""Where a measured kernel sits on its roofline: the bytes its outputs take, the precision of its compute roof,
and its achieved bandwidth (and FLOP/s) as fractions of the device's ceilings."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from kforge_bot.hardware import Ceilings, roofline

# A workload model: shape set -> (bytes moved, FLOPs or None). Benchmarks that know their kernels pass one;
# otherwise the compulsory traffic is counted from the baseline's evaluation (inputs read once, outputs written once).
WorkloadModel = Callable[[dict[str, Any]], "tuple[float, float | None]"]

# Output dtypes -> the precision of the compute roof they are measured against.
_PRECISION = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
              "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "int8": "int8"}


def output_bytes(result: dict[str, Any] | None) -> list[int | None]:
    """Bytes of the outputs per shape set, from the correctness records (shape and dtype of each output)."""
    if not result:
        return []
    sizes: dict[int, int] = {}
    for record in (result.get("correctness") or {}).get("records") or []:
        shape_set = record.get("shape_set")
        if not isinstance(shape_set, int) or shape_set in sizes:
            continue
        total = 0
        for out in record.get("outputs") or []:
            size = _DTYPE_BYTES.get(str(out.get("dtype")))
            if size is None or out.get("shape") is None:
                total = -1
                break
            total += size * math.prod(out["shape"])
        if total >= 0:
            sizes[shape_set] = total
    count = max(sizes, default=-1) + 1
    return [sizes.get(i) for i in range(count)]


_DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
                "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "complex64": 8}


def output_precision(result: dict[str, Any] | None) -> str:
    for record in ((result or {}).get("correctness") or {}).get("records") or []:
        for out in record.get("outputs") or []:
            if str(out.get("dtype")) in _PRECISION:
                return _PRECISION[str(out["dtype"])]
    return "fp32"


def roofline_position(result: dict[str, Any] | None, side: str, workload: dict[str, Any] | None,
                      ceilings: dict[str, Any] | None) -> dict[str, Any] | None:
    """Achieved bandwidth (and FLOP/s when the workload says) of one side of an evaluation, summed over
    the shape sets whose bytes are known, with fractions of the ceilings when those are known.

    Without FLOPs the position is the compulsory traffic's bandwidth (each input read once, each output
    written once): a lower bound of the real traffic, so its fraction of peak bandwidth never overstates
    how close a memory-bound kernel is to its roof. No "bound" is claimed then."""
    if not result or not workload or result.get("verdict") != "pass":
        return None
    rows = {t.get("shape_set"): t for t in (result.get("details") or {}).get("timing") or []}
    shapes = workload.get("shape_sets") or []
    total_bytes = 0.0
    total_flops = 0.0
    flops_known = True
    seconds = 0.0
    used = 0
    for i, shape in enumerate(shapes):
        row = rows.get(i)
        if row is None or shape.get("bytes") is None:
            continue
        median = (row.get(side) or {}).get("median_ms")
        if not median:
            continue
        total_bytes += float(shape["bytes"])
        if shape.get("flops") is None:
            flops_known = False
        else:
            total_flops += float(shape["flops"])
        seconds += float(median) / 1000.0
        used += 1
    if used == 0 or seconds <= 0:
        return None
    ceil = Ceilings(**ceilings) if ceilings else None
    precision = workload.get("precision") or output_precision(result)
    position = roofline(total_bytes, total_flops if flops_known else 0.0, seconds, ceil, precision)
    position["flops_known"] = flops_known
    position["shape_sets_used"] = used
    position["basis"] = workload.get("basis", "")
    if not flops_known:
        position["achieved_tflops"] = None
        position["compute_fraction"] = None
        position["arithmetic_intensity"] = None
        position["bound"] = "unknown"
        position["roofline_fraction"] = position.get("bandwidth_fraction")
    return position


def workload(shape_sets: Sequence[dict[str, Any]], baseline: dict[str, Any] | None,
             model: WorkloadModel | None = None) -> dict[str, Any]:
    """Bytes (and FLOPs when known) per shape set: the caller's model, else counted from the baseline's
    evaluation. The trajectory's workload event."""
    shapes = list(shape_sets)
    if model is not None:
        rows = []
        for shape in shapes:
            moved, flops = model(shape)
            rows.append({"bytes": moved, "flops": flops})
        return {"shape_sets": rows, "basis": "the caller's workload model (bytes moved and FLOPs per call)"}
    outputs = output_bytes(baseline)
    # The reference's evaluation child sizes the inputs it makes (repository code never runs here).
    inputs = ((baseline or {}).get("details") or {}).get("input_bytes")
    counted = ((baseline or {}).get("profile") or {}).get("reference_flops") or []
    rows = []
    for i in range(len(shapes)):
        in_b = inputs[i] if inputs and i < len(inputs) else None
        out_b = outputs[i] if i < len(outputs) else None
        total = in_b + out_b if in_b is not None and out_b is not None else None
        rows.append({"bytes": total, "input_bytes": in_b, "output_bytes": out_b,
                     "flops": counted[i] if i < len(counted) else None})
    basis = "compulsory traffic: every input read once and every output written once (module parameters not counted)"
    if rows and all(r["flops"] is not None for r in rows):
        basis += "; FLOPs: the framework profiler's count for the reference's ops (matmuls, convolutions, ...)"
    data: dict[str, Any] = {"shape_sets": rows, "basis": basis}
    if not inputs:
        data["error"] = "the baseline's result does not say the inputs' sizes"
    return data
