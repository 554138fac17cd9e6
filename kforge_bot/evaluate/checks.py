"""Output checks: structural ones (in the worker, on live tensors) and the numeric comparison (parent).

The numeric comparison is the parent's: the candidate's outputs come back as files, the reference's from
another process, and `compare_outputs` decides. Tolerances go by dtype, and besides the elementwise
`|c - r| <= atol + rtol * |r|` a relative-norm bound catches outputs that are wrong everywhere by less than
`atol` (all zeros where the true values are tiny) and precision downgrades that a loose elementwise
tolerance lets through; a constant output where the reference varies is rejected outright.
"""

from __future__ import annotations

import math
from typing import Any

import torch

# (atol, rtol, relative-norm bound) by dtype. fp32 follows KernelBench's 1e-4; the norm bound of 1e-4
# rejects a bf16 computation standing in for fp32 (relative error ~3e-3) and tf32 (~3e-4) unless a
# manifest loosens it on purpose.
DTYPE_TOLERANCES: dict[torch.dtype, tuple[float, float, float]] = {
    torch.float64: (1e-7, 1e-7, 1e-9),
    torch.float32: (1e-4, 1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2, 5e-3),
    torch.bfloat16: (1e-2, 1e-2, 1.6e-2),
    torch.float8_e4m3fn: (1e-1, 1e-1, 1e-1),
    torch.float8_e5m2: (2e-1, 2e-1, 2e-1),
}


class CheckFailure(Exception):
    """A structural check failed in the worker; `kind` picks the verdict (rejected or incorrect)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def flatten_outputs(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        out: list[Any] = []
        for item in value:
            out.extend(flatten_outputs(item))
        return out
    return [value]


def check_plain_outputs(outputs: list[Any], device_type: str) -> None:
    """Only plain, materialised, strided tensors on the target device count as results."""
    if not outputs:
        raise CheckFailure("incorrect", "returned no outputs")
    for i, out in enumerate(outputs):
        if type(out) is not torch.Tensor:  # noqa: E721 - subclasses (lazy, fake, deferred) are the point
            name = type(out).__module__ + "." + type(out).__qualname__
            kind = "rejected" if isinstance(out, torch.Tensor) else "incorrect"
            raise CheckFailure(kind, f"output {i} is a {name}, not a plain torch.Tensor "
                                     "(tensor subclasses can defer work past the timed region)")
        if out.layout != torch.strided:
            raise CheckFailure("rejected", f"output {i} has layout {out.layout}, expected a dense strided tensor")
        if out.is_meta or out.device.type != device_type:
            raise CheckFailure("rejected", f"output {i} is on {out.device}, expected the {device_type} device")


def storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def check_no_alias(outputs: list[torch.Tensor], inputs: list[Any]) -> None:
    """Outputs must be fresh memory: not an input, not a view of one, not overlapping each other."""
    in_spans = [(i, storage_span(t)) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.numel()]
    out_spans = [(i, storage_span(t)) for i, t in enumerate(outputs) if t.numel()]
    for oi, (o0, o1) in out_spans:
        for ii, (i0, i1) in in_spans:
            if o0 < i1 and i0 < o1:
                raise CheckFailure("rejected", f"output {oi} shares memory with input {ii} "
                                               "(outputs must not alias inputs)")
    for a in range(len(out_spans)):
        for b in range(a + 1, len(out_spans)):
            (ai, (a0, a1)), (bi, (b0, b1)) = out_spans[a], out_spans[b]
            if a0 < b1 and b0 < a1:
                raise CheckFailure("rejected", f"outputs {ai} and {bi} share memory")


def snapshot_inputs(inputs: list[Any]) -> list[Any]:
    return [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs]


def check_inputs_unchanged(inputs: list[Any], snapshot: list[Any]) -> None:
    for i, (now, before) in enumerate(zip(inputs, snapshot)):
        if isinstance(before, torch.Tensor) and not torch.equal(now, before):
            raise CheckFailure("rejected", f"input {i} was modified in place (inputs must stay unchanged)")


# ----------------------------------------------------------------------------------- numeric comparison


def perturb_one(inputs: list[Any], seed: int, undo: list[Any] | None = None) -> bool:
    """Copy one element of the first floating-point input over another, both picked by `seed`, in place (the
    reference's worker and the candidate's change the same element). A value the input already holds keeps
    the input in its domain (masks, positive scales). False when no input can be changed. With `undo`, what
    puts the element back is appended to it (see `undo_perturbation`)."""
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 1:
            count = value.numel()
            target = seed % count
            source = (target + 1 + (seed // count) % (count - 1)) % count  # never the target itself
            where = _unravel(target, value.shape)
            if undo is not None:
                undo.append((value, where, value[where].clone()))
            value[where] = value[_unravel(source, value.shape)]
            return True
    return False


def undo_perturbation(undo: list[Any]) -> None:
    for value, where, old in reversed(undo):
        value[where] = old
    undo.clear()


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, position = divmod(flat, size)
        index.append(position)
    return tuple(reversed(index))


def tolerance_for(dtype: torch.dtype, override: dict[str, float] | None) -> tuple[float, float, float]:
    atol, rtol, norm = DTYPE_TOLERANCES.get(dtype, (0.0, 0.0, 0.0))  # integers and bools: exact
    if override:
        atol = override.get("atol", atol)
        rtol = override.get("rtol", rtol)
        # A manifest that loosens the elementwise bound loosens the norm bound alike.
        norm = max(norm, min(atol, rtol) if "atol" in override and "rtol" in override else norm)
    return atol, rtol, norm


def compare_tensor(index: int, cand: torch.Tensor, ref: torch.Tensor,
                   override: dict[str, float] | None, device: str = "cpu") -> dict[str, Any]:
    """Compare one output; returns a JSON-ready record with `ok` and, when not ok, `problem`."""
    record: dict[str, Any] = {"index": index, "shape": list(ref.shape), "dtype": str(ref.dtype).replace("torch.", "")}
    if cand.shape != ref.shape:
        return {**record, "ok": False, "problem": f"shape {list(cand.shape)} != expected {list(ref.shape)}"}
    if cand.dtype != ref.dtype:
        return {**record, "ok": False, "problem": f"dtype {cand.dtype} != expected {ref.dtype}"}
    atol, rtol, norm_tol = tolerance_for(ref.dtype, override)
    record.update(atol=atol, rtol=rtol, norm_tol=norm_tol)
    if not ref.is_floating_point() and not ref.is_complex():
        mismatches = int((cand != ref).sum())
        record.update(max_abs=float((cand.long() - ref.long()).abs().max()) if ref.numel() else 0.0,
                      max_rel=0.0, rel_norm=0.0)
        return {**record, "ok": mismatches == 0,
                **({"problem": f"{mismatches} of {ref.numel()} integer elements differ"} if mismatches else {})}
    # float64 on the comparison device: a GPU runner compares gigabyte outputs in milliseconds.
    c = cand.detach().to(device=device, dtype=torch.float64)
    r = ref.detach().to(device=device, dtype=torch.float64)
    ref_finite = torch.isfinite(r)
    cand_finite = torch.isfinite(c)
    bad_nonfinite = int((~cand_finite & ref_finite).sum())
    if bad_nonfinite:
        return {**record, "ok": False, "max_abs": math.inf, "max_rel": math.inf,
                "problem": f"{bad_nonfinite} NaN/Inf values where the reference is finite"}
    # Where the reference is NaN or +-Inf the candidate must be the same (nan_to_num would equate NaN with 0).
    c_nf, r_nf = c[~ref_finite], r[~ref_finite]
    same_nonfinite = bool(((c_nf == r_nf) | (torch.isnan(c_nf) & torch.isnan(r_nf))).all())
    if not same_nonfinite:
        return {**record, "ok": False, "problem": "non-finite values differ from the reference's"}
    c, r = c[ref_finite], r[ref_finite]
    diff = (c - r).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / r.abs().clamp_min(1e-30)).max()) if diff.numel() else 0.0
    ref_norm = float(r.norm()) if r.numel() else 0.0
    rel_norm = float(diff.norm()) / ref_norm if ref_norm > 0 else (0.0 if max_abs == 0 else math.inf)
    record.update(max_abs=max_abs, max_rel=max_rel, rel_norm=rel_norm)
    over = int((diff > atol + rtol * r.abs()).sum())
    if over:
        worst = int(torch.argmax(diff - (atol + rtol * r.abs())))
        return {**record, "ok": False,
                "problem": f"{over} of {r.numel()} elements outside atol={atol:g}, rtol={rtol:g} "
                           f"(worst: got {float(c[worst]):.6g}, expected {float(r[worst]):.6g})"}
    if rel_norm > norm_tol:
        return {**record, "ok": False,
                "problem": f"relative error {rel_norm:.3g} over the bound {norm_tol:g} for {record['dtype']} "
                           "(results wrong everywhere by a little, or computed at lower precision)"}
    if r.numel() > 1 and float(r.std()) > 0 and float(c.std()) == 0:
        return {**record, "ok": False, "problem": "output is constant where the reference varies"}
    return {**record, "ok": True}


def comparison_device(target: str) -> str:
    """Where the parent compares outputs: the GPU when the target is one and this process can reach it."""
    return "cuda" if target == "cuda" and torch.cuda.is_available() else "cpu"


def compare_outputs(cand: list[torch.Tensor], ref: list[torch.Tensor],
                    override: dict[str, float] | None, device: str = "cpu") -> list[dict[str, Any]]:
    if len(cand) != len(ref):
        return [{"index": 0, "ok": False, "problem": f"{len(cand)} outputs, expected {len(ref)}"}]
    return [compare_tensor(i, c, r, override, device) for i, (c, r) in enumerate(zip(cand, ref))]
