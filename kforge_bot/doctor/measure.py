"""The child half of `kforge-bot doctor` (`python -m kforge_bot.doctor measure`): everything that needs torch.

It measures the device's copy bandwidth and matmul FLOP/s, reads the device's facts and tries the profiler;
each piece that fails records its error. Sizes: see kforge_bot/doctor/__init__.py."""

from __future__ import annotations

import os
import platform
import statistics
import time
from typing import Any, Callable

from kforge_bot.targets import choose_target, cpu_model

QUICK_ENV = "KFORGE_DOCTOR_QUICK"


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
    if requested == "auto":  # what auto means everywhere (the CPU when nothing else is here)
        return choose_target("auto").device_kind(), avail, None
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
    from torch.profiler import ProfilerActivity, profile  # the child only: the parent never imports torch

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
    import torch  # the child only: a broken driver must not take the parent (the CLI) down

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

