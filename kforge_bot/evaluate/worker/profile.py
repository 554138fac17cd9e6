"""Worker-side profiling of one call: framework ops, device kernels and the streams they ran on.

The digest feeds the analyst and the evidence; the op list lets the parent spot a candidate that simply
calls the framework op it claims to replace; the stream list catches work launched on a side stream,
which device events on the current stream would not see.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
# Bound when the worker imports this module, before any candidate code exists (torch imports both anyway): an
# import inside a function would read whatever a candidate had put in their place by then.
from torch.autograd import profiler
from torch.profiler import ProfilerActivity, profile

# Framework ops that move or shape data without computing anything a kernel would replace.
NON_COMPUTE_OPS = {
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::zeros", "aten::zeros_like", "aten::ones",
    "aten::ones_like", "aten::full", "aten::full_like", "aten::fill_", "aten::zero_", "aten::view",
    "aten::reshape", "aten::_reshape_alias", "aten::contiguous", "aten::clone", "aten::copy_", "aten::to",
    "aten::_to_copy", "aten::as_strided", "aten::t", "aten::transpose", "aten::permute", "aten::expand",
    "aten::select", "aten::slice", "aten::unsqueeze", "aten::squeeze", "aten::detach", "aten::alias",
    "aten::lift_fresh", "aten::resolve_conj", "aten::resolve_neg", "aten::size", "aten::stride", "aten::item",
    "aten::_local_scalar_dense", "aten::is_nonzero", "aten::numel", "aten::flatten", "aten::unflatten",
    "aten::split", "aten::chunk", "aten::narrow", "aten::unbind", "aten::stack", "aten::cat", "aten::record_stream",
    "aten::result_type", "aten::set_", "aten::resize_", "aten::new_empty", "aten::new_empty_strided",
    "aten::new_zeros", "aten::empty_permuted", "aten::_unsafe_view", "aten::expand_as", "aten::view_as",
    "aten::contiguous", "aten::dropout", "aten::feature_dropout", "aten::linear_backward",
}


def compute_ops(op_names: list[str]) -> list[str]:
    return sorted({name for name in op_names if name.startswith("aten::") and name not in NON_COMPUTE_OPS})


def _profile_cpu(fn: Callable[[], Any]) -> dict[str, Any]:
    """The CPU's digest (the aten ops called) from the autograd profiler. torch.profiler's wrapper imports
    torch._inductor on first use, which costs seconds in every fresh worker and adds nothing on the CPU."""
    with profiler.profile(use_cpu=True) as prof:
        fn()
    ops = sorted({e.name for e in prof.function_events if e.name.startswith("aten::")})
    return {"ops": ops, "kernels": [], "streams": {}, "side_stream_kernels": [], "compute_ops": compute_ops(ops)}


def count_flops(fn: Callable[[], Any]) -> int | None:
    """The FLOPs the framework counts for one call (matmuls, convolutions, elementwise arithmetic with a
    formula), or None when no op it ran has a formula (a custom kernel, a softmax): unknown, not zero. Host-side
    op records only, so no device profiler is started."""
    with profiler.profile(use_cpu=True, with_flops=True) as prof:
        fn()
    total, counted = 0, False
    for event in prof.function_events:
        flops = getattr(event, "flops", 0) or 0
        parent = event.cpu_parent
        while parent is not None and not (getattr(parent, "flops", 0) or 0):
            parent = parent.cpu_parent
        if flops and parent is None:  # an op inside a counted op (addmm inside linear) is counted once
            total, counted = total + int(flops), True
    return total if counted else None


def profile_call(fn: Callable[[], Any], device: torch.device, synchronize: Callable[[], None]) -> dict[str, Any]:
    """Run `fn` once under the framework profiler and digest what happened."""
    if device.type == "cpu":
        return _profile_cpu(fn)
    digest = _profile_device(fn, device, synchronize, wrapper=False)
    if not digest.get("streams_checked"):
        # No device events came back that way: torch.profiler's own path, which the side-stream check was
        # first proven on, whatever its first use costs.
        digest = _profile_device(fn, device, synchronize, wrapper=True)
    return digest


def _profile_device(fn: Callable[[], Any], device: torch.device, synchronize: Callable[[], None],
                    wrapper: bool) -> dict[str, Any]:
    marker = torch.zeros(1, device=device)
    synchronize()
    if wrapper:
        activity = {"cuda": ProfilerActivity.CUDA, "xpu": getattr(ProfilerActivity, "XPU", None)}.get(device.type)
        session = profile(activities=[ProfilerActivity.CPU] + ([activity] if activity is not None else []))
    else:
        # The autograd profiler with kineto and the device's activity (what torch.profiler runs) but without
        # torch.profiler's wrapper, whose first use imports torch._inductor: seconds in every fresh worker.
        session = profiler.profile(use_device=device.type, use_kineto=True)
    with session as prof:
        marker.add_(1)  # one known kernel on the current stream, to learn that stream's id
        fn()
        synchronize()
    results = prof.profiler if wrapper else prof  # the autograd profiler inside torch.profiler's wrapper
    digest: dict[str, Any] = {"ops": [], "kernels": [], "streams": {}, "side_stream_kernels": []}
    ops: dict[str, int] = {}
    for event in results.function_events:
        if event.name.startswith("aten::"):
            ops[event.name] = ops.get(event.name, 0) + 1
    digest["ops"] = sorted(ops)
    digest["compute_ops"] = compute_ops(list(ops))
    kernels: list[dict[str, Any]] = []
    try:
        raw = results.kineto_results.events()  # type: ignore[union-attr]
    except AttributeError:
        digest["streams_checked"] = False
        return digest
    current_stream = None
    device_events = [e for e in raw if e.device_type() != torch.autograd.DeviceType.CPU]
    device_events.sort(key=lambda e: e.start_ns())  # the marker ran first
    for event in device_events:
        name = event.name()
        stream = int(event.device_resource_id())
        record = {"name": name, "us": event.duration_ns() / 1000.0, "stream": stream}
        if current_stream is None and ("fill" in name or "add" in name.lower()
                                                              or "elementwise" in name.lower()):
            current_stream = stream
            continue  # the marker itself
        kernels.append(record)
    digest["streams_checked"] = current_stream is not None
    digest["current_stream"] = current_stream
    digest["kernels"] = _merge_kernels(kernels)
    digest["device_us"] = sum(k["us"] for k in kernels)
    if current_stream is not None:
        digest["side_stream_kernels"] = sorted({k["name"][:120] for k in kernels if k["stream"] != current_stream})
    return digest


def _merge_kernels(kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {}
    for kernel in kernels:
        entry = merged.setdefault(kernel["name"], {"name": kernel["name"][:200], "calls": 0, "us": 0.0})
        entry["calls"] += 1
        entry["us"] += kernel["us"]
    return sorted(merged.values(), key=lambda k: -k["us"])
