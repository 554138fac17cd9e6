"""Output checks: structural ones (in the worker, on live tensors) and the numeric comparison (parent).

The numeric comparison is the parent's: the candidate's outputs come back as files, the reference's from
another process, and `compare_outputs` decides. Tolerances go by dtype, and besides the elementwise
`|c - r| <= atol + rtol * |r|` a relative-norm bound catches outputs that are wrong everywhere by less than
`atol` (all zeros where the true values are tiny) and precision downgrades that a loose elementwise
tolerance lets through; a constant output where the reference varies is rejected outright.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from kforge_bot.targets import target_kind

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
    """The tensors in a (nested) tuple or list of outputs. A subclass's contents are read as its base class
    holds them: its own __iter__ (or an `__class__` that claims to be a list) would run the candidate's code
    when the harness looks, after the timed region, and could do the work only then."""
    kind = type(value)  # not isinstance: that reads a claimed __class__
    if issubclass(kind, (tuple, list)):
        out: list[Any] = []
        for item in (tuple.__iter__(value) if issubclass(kind, tuple) else list.__iter__(value)):
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
        own = [name for name in _own_attributes(out) if not compiler_bookkeeping(out, name, _tensor_dict(out)[name])]
        if own:
            raise CheckFailure("rejected", f"output {i} has attributes of its own ({', '.join(own[:5])}): set on one "
                                           "tensor, a name like clone or fill_ runs the candidate's code when the "
                                           "harness copies or poisons the output, after the timed region")
        if out.layout != torch.strided:
            raise CheckFailure("rejected", f"output {i} has layout {out.layout}, expected a dense strided tensor")
        if out.is_meta or out.device.type != device_type:
            raise CheckFailure("rejected", f"output {i} is on {out.device}, expected the {device_type} device")


def _own_attributes(t: torch.Tensor) -> list[str]:
    # A plain tensor's instance dictionary is empty; read through the class's own descriptor (type(t) is
    # torch.Tensor here), so nothing on the instance is consulted.
    return sorted(map(str, _tensor_dict(t)))


def check_inputs_plain(inputs: list[Any]) -> None:
    """Inputs the candidate was handed must not have gained attributes: a method set on one (copy_,
    is_floating_point, ...) tells the candidate when the harness refills or perturbs it. torch.compile's own
    marks (`compiler_bookkeeping`) are not the candidate's: an honest compiled kernel leaves them."""
    for i, t in enumerate(inputs):
        if type(t) is torch.Tensor:  # noqa: E721
            own = [name for name, value in _tensor_dict(t).items() if not compiler_bookkeeping(t, name, value)]
            if own:
                raise CheckFailure("rejected", f"input {i} was given attributes of its own "
                                               f"({', '.join(sorted(map(str, own))[:5])})")


# What torch.compile (dynamo's mark_dynamic, mark_static, and the shape guards it installs on the inputs it sees,
# torch/_dynamo/decorators.py) sets on a tensor: per dimension, indices, ranges, hints and ids.
_DIM_INDICES = ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices", "_dynamo_unbacked_indices",
                "_dynamo_strict_unbacked_indices", "_dynamo_static_indices", "_dynamo_propagated_dynamic_indices")
_PER_DIM = ("_dynamo_dynamic_range", "_dynamo_hint_overrides", "_dynamo_unbacked_bounds", "_dynamo_shape_ids")
_FLAGS = {"_dynamo_marked_static": bool, "_dynamo_static_input_type": str}


def compiler_bookkeeping(t: torch.Tensor, name: Any, value: Any) -> bool:
    """Whether one attribute on an input is torch.compile's own bookkeeping: one of the names it sets, holding
    what it puts there (dimension indices of this tensor, a few plain numbers per dimension, a flag). Anything
    else under those names (a tensor, a function, a cache) is state a candidate stashed, and is refused."""
    if not isinstance(name, str):
        return False
    dims = t.dim()
    if name in _DIM_INDICES:
        return isinstance(value, (set, frozenset)) and all(type(i) is int and 0 <= i < dims for i in value)
    if name in _PER_DIM:
        items = list(value.items()) if isinstance(value, dict) else list(value) if isinstance(value, (set, frozenset)) \
            else None
        return items is not None and len(items) <= max(dims, 1) and all(_plain_numbers(item) for item in items)
    kind = _FLAGS.get(name)
    return kind is not None and type(value) is kind and (kind is not str or len(value) <= 32)


def _plain_numbers(value: Any, depth: int = 0) -> bool:
    if value is None or type(value) in (int, float, bool) or (type(value) is str and len(value) <= 64):
        return True
    return depth < 2 and type(value) is tuple and len(value) <= 4 and all(_plain_numbers(v, depth + 1) for v in value)


def _tensor_dict(t: torch.Tensor) -> dict[str, Any]:
    return _TENSOR_DICT.__get__(t, torch.Tensor)  # type: ignore[no-any-return]


_TENSOR_DICT = next(vars(k)["__dict__"] for k in torch.Tensor.__mro__ if "__dict__" in vars(k))


def storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def check_no_alias(outputs: list[torch.Tensor], inputs: list[Any], slots: frozenset[int] = frozenset()) -> None:
    """Outputs must be fresh memory: not an input, not a view of one, not overlapping each other. `slots`: the
    inputs that are output buffers (GPU MODE's data holds the output tensor the reference writes and returns),
    which an output may be."""
    in_spans = [(i, storage_span(t)) for i, t in enumerate(inputs)
                if isinstance(t, torch.Tensor) and t.numel() and i not in slots]
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


def poison_outputs(outputs: list[Any]) -> None:
    """NaN (floats) or -1 over every plain tensor among (nested) outputs, through the base class: a tensor
    subclass or a method of the candidate's own would run its code (anything but a plain tensor is refused by
    the checks that see it)."""
    for out in outputs:
        for t in flatten_outputs(out):
            if type(t) is torch.Tensor and torch.Tensor.numel(t):
                torch.Tensor.fill_(t, math.nan if torch.Tensor.is_floating_point(t) else -1)


def snapshot_inputs(inputs: list[Any]) -> list[Any]:
    return [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs]


def output_slots(outputs: list[Any], inputs: list[Any]) -> set[int]:
    """The inputs an output shares memory with: where the reference does this, those inputs are output buffers."""
    out_spans = [storage_span(t) for t in outputs if type(t) is torch.Tensor and t.numel()]  # noqa: E721
    return {i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.numel()
            and any(o0 < storage_span(t)[1] and storage_span(t)[0] < o1 for o0, o1 in out_spans)}


def unread_inputs(make: Callable[[], list[Any]], call: Callable[[list[Any]], list[Any]], outputs: list[Any],
                  seed: int, count: int) -> set[int]:
    """The floating-point inputs the reference never reads: given other values there, it answers exactly as
    before. In a GPU MODE problem these are the output buffers data carries for submissions to write (the reference
    may return a fresh tensor instead), so a submission's writes to them and outputs in them are its results, not
    tampering. A reference that fails on the other values, or answers differently, reads that input. Integer
    inputs are never probed: other values there may be offsets a reference kernel would read out of bounds (an
    integer buffer the reference writes is found by output_slots)."""
    found: set[int] = set()
    for i in range(count):
        values = make()
        tensor = values[i] if i < len(values) else None
        if not isinstance(tensor, torch.Tensor) or not tensor.numel() or not (
                tensor.is_floating_point() or tensor.is_complex()):
            continue
        try:
            with torch.no_grad():
                _refill(tensor, seed + i)
            again = call(values)
        except Exception:  # noqa: BLE001 - an input it cannot take other values in, or fails on: it reads it
            continue
        if len(again) == len(outputs) and all(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                                              and torch.equal(a, b) for a, b in zip(again, outputs)):
            found.add(i)
    return found


def _refill(tensor: torch.Tensor, seed: int) -> None:
    """Other values of the same kind, drawn from the seed."""
    generator = torch.Generator(device=tensor.device).manual_seed(seed % (1 << 63))
    tensor.copy_(torch.rand(tensor.shape, generator=generator, device=tensor.device) * 2 - 1)


def aliases_any(output: torch.Tensor, inputs: list[Any], slots: frozenset[int]) -> bool:
    """Whether `output` lies in one of the output-buffer inputs."""
    o0, o1 = storage_span(output)
    return any(o0 < storage_span(inputs[i])[1] and storage_span(inputs[i])[0] < o1 for i in slots
               if i < len(inputs) and isinstance(inputs[i], torch.Tensor))


def check_inputs_unchanged(inputs: list[Any], snapshot: list[Any], written: Any = (),
                           skip: frozenset[int] = frozenset()) -> None:
    """Every input as it was, but those the manifest declares the call writes (`inplace:`: compared as outputs)
    and a GPU MODE problem's output buffers (`skip`: written by every call)."""
    for i, (now, before) in enumerate(zip(inputs, snapshot)):
        if i in skip:
            continue  # an output buffer: written by every call
        if i not in written and isinstance(before, torch.Tensor) and not torch.equal(now, before):
            declared = f" (declared in place: {', '.join(map(str, written))})" if written else ""
            raise CheckFailure("rejected", f"input {i} was modified in place (inputs must stay unchanged){declared}")


# ----------------------------------------------------------------------------------- numeric comparison


# Elements changed in one input after timing. One element is a vacuous check wherever the answer does not depend on
# it (a ReLU's zero region, a max that is elsewhere): a batch-and-skip candidate (gpu-mode/reference-kernels#104,
# answers computed ahead for the other buffers, returned on their calls) passed a ReLU problem that way. With 16,
# a position each output depends on is all but certain to be among them.
PERTURBED_ELEMENTS = 16
_SPREAD = 0x9E3779B97F4A7C15  # an odd 64-bit constant: each k picks an unrelated position


def perturb_elements(inputs: list[Any], seed: int, undo: list[Any] | None = None,
                     skip: frozenset[int] = frozenset()) -> bool:
    """Copy PERTURBED_ELEMENTS elements of the first floating-point input over others, all picked by `seed`, in
    place (the reference's worker and the candidate's make the same change). A value the input already holds keeps
    the input in its domain (masks, positive scales). False when no input can be changed. With `undo`, what puts
    the elements back is appended to it (see `undo_perturbation`). Output buffers (`skip`) are never changed."""
    for i, value in enumerate(inputs):
        if i not in skip and isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 1:
            count = value.numel()
            for k in range(min(PERTURBED_ELEMENTS, count - 1)):
                mixed = (seed + k * _SPREAD) % (1 << 64)
                target = mixed % count
                source = (target + 1 + (mixed // count) % (count - 1)) % count  # never the target itself
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


COMPARE_CHUNK = 1 << 25  # elements per step: float64 temporaries of a few hundred MB, whatever the output's size
ON_HOST_BELOW = 1 << 22  # elements: a host-side output this small is compared where it is (no device round trip)


def compare_tensor(index: int, cand: torch.Tensor, ref: torch.Tensor,
                   override: dict[str, float] | None, device: str = "cpu", *, gradient: bool = False) -> dict[str, Any]:
    """Compare one output; returns a JSON-ready record with `ok` and, when not ok, `problem`. Works through the
    tensors in chunks on `device`, so a multi-gigabyte output needs no more memory than one chunk.

    A `gradient` is a sum over every output element its input reaches (a weight's gradient sums thousands of
    rows): its rounding error scales with the size of those terms, not with each sum's value, so an element whose
    sum cancels to near zero carries the same absolute error as the rest. Its atol is therefore taken relative
    to the gradient's root-mean-square where that exceeds 1 (never tighter than the dtype's own)."""
    record: dict[str, Any] = {"index": index, "shape": list(ref.shape), "dtype": str(ref.dtype).replace("torch.", "")}
    if cand.shape != ref.shape:
        return {**record, "ok": False, "problem": f"shape {list(cand.shape)} != expected {list(ref.shape)}"}
    if cand.dtype != ref.dtype:
        return {**record, "ok": False, "problem": f"dtype {cand.dtype} != expected {ref.dtype}"}
    atol, rtol, norm_tol = tolerance_for(ref.dtype, override)
    flat_c, flat_r = cand.detach().reshape(-1), ref.detach().reshape(-1)
    if flat_r.numel() < ON_HOST_BELOW and flat_r.device.type == flat_c.device.type == "cpu":
        device = "cpu"  # copies and first-use kernel loads on a GPU cost more than the host's few milliseconds
    chunks = [(i, min(i + COMPARE_CHUNK, flat_r.numel())) for i in range(0, flat_r.numel(), COMPARE_CHUNK)]
    if gradient and ref.is_floating_point() and flat_r.numel():
        squares = sum(float(flat_r[i:j].to(device).to(torch.float64).nan_to_num(0.0, 0.0, 0.0).square().sum())
                      for i, j in chunks)
        scale = math.sqrt(squares / flat_r.numel())
        if scale > 1.0:
            record["atol_scaled_by"] = scale
            atol *= scale
    record.update(atol=atol, rtol=rtol, norm_tol=norm_tol)
    if not ref.is_floating_point() and not ref.is_complex():
        mismatches, max_abs = 0, 0.0
        for i, j in chunks:
            c, r = flat_c[i:j].to(device).long(), flat_r[i:j].to(device).long()
            mismatches += int((c != r).sum())
            max_abs = max(max_abs, float((c - r).abs().max()))
        record.update(max_abs=max_abs, max_rel=0.0, rel_norm=0.0)
        return {**record, "ok": mismatches == 0,
                **({"problem": f"{mismatches} of {ref.numel()} integer elements differ"} if mismatches else {})}
    stats = _FloatStats()
    for i, j in chunks:
        # float64 on the comparison device: a GPU runner compares gigabyte outputs in well under a second.
        stats.add(flat_c[i:j].to(device).to(torch.float64), flat_r[i:j].to(device).to(torch.float64), atol, rtol)
    if stats.bad_nonfinite:
        return {**record, "ok": False, "max_abs": math.inf, "max_rel": math.inf,
                "problem": f"{stats.bad_nonfinite} NaN/Inf values where the reference is finite"}
    if not stats.same_nonfinite:
        return {**record, "ok": False, "problem": "non-finite values differ from the reference's"}
    rel_norm = math.sqrt(stats.diff_sq) / math.sqrt(stats.ref_sq) if stats.ref_sq > 0 else \
        (0.0 if stats.max_abs == 0 else math.inf)
    record.update(max_abs=stats.max_abs, max_rel=stats.max_rel, rel_norm=rel_norm)
    if stats.over:
        return {**record, "ok": False,
                "problem": f"{stats.over} of {stats.finite} elements outside atol={atol:g}, rtol={rtol:g} "
                           f"(worst: got {stats.worst[1]:.6g}, expected {stats.worst[2]:.6g})"}
    if rel_norm > norm_tol:
        return {**record, "ok": False,
                "problem": f"relative error {rel_norm:.3g} over the bound {norm_tol:g} for {record['dtype']} "
                           "(results wrong everywhere by a little, or computed at lower precision)"}
    if stats.finite > 1 and stats.ref_range[0] < stats.ref_range[1] and stats.cand_range[0] == stats.cand_range[1]:
        return {**record, "ok": False, "problem": "output is constant where the reference varies"}
    return {**record, "ok": True}


class _FloatStats:
    """What compare_tensor decides on, accumulated chunk by chunk (float64 chunks of one output)."""

    def __init__(self) -> None:
        self.bad_nonfinite = 0  # NaN/Inf in the candidate where the reference is finite
        self.same_nonfinite = True  # where the reference is NaN/Inf, the candidate is the same
        self.finite = 0
        self.max_abs = self.max_rel = self.diff_sq = self.ref_sq = 0.0
        self.over = 0
        self.worst = (-math.inf, 0.0, 0.0)  # (excess over the tolerance, got, expected)
        self.ref_range = (math.inf, -math.inf)
        self.cand_range = (math.inf, -math.inf)

    def add(self, c: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> None:
        ref_finite = torch.isfinite(r)
        self.bad_nonfinite += int((~torch.isfinite(c) & ref_finite).sum())
        c_nf, r_nf = c[~ref_finite], r[~ref_finite]
        self.same_nonfinite &= bool(((c_nf == r_nf) | (torch.isnan(c_nf) & torch.isnan(r_nf))).all())
        c, r = c[ref_finite], r[ref_finite]
        if not r.numel():
            return
        self.finite += r.numel()
        diff = (c - r).abs()
        self.max_abs = max(self.max_abs, float(diff.max()))
        self.max_rel = max(self.max_rel, float((diff / r.abs().clamp_min(1e-30)).max()))
        self.diff_sq += float(diff.square().sum())
        self.ref_sq += float(r.square().sum())
        excess = diff - (atol + rtol * r.abs())
        self.over += int((excess > 0).sum())
        worst = int(torch.argmax(excess))
        if float(excess[worst]) > self.worst[0]:
            self.worst = (float(excess[worst]), float(c[worst]), float(r[worst]))
        self.ref_range = (min(self.ref_range[0], float(r.min())), max(self.ref_range[1], float(r.max())))
        finite_c = c[torch.isfinite(c)]
        if finite_c.numel():
            low, high = float(finite_c.min()), float(finite_c.max())
            self.cand_range = (min(self.cand_range[0], low), max(self.cand_range[1], high))


def comparison_device(target: str) -> str:
    """Where the parent compares outputs: the target's GPU when it is one and this process can reach it."""
    return target if target_kind(target) == "cuda" and torch.cuda.is_available() else "cpu"


def compare_outputs(cand: list[torch.Tensor], ref: list[torch.Tensor], override: dict[str, float] | None,
                    device: str = "cpu", *, gradients: int = 0,
                    gradient_override: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Every output against the reference's; the last `gradients` of them are gradients (see compare_tensor),
    compared with `gradient_override` where the manifest gives the backward a tolerance of its own."""
    if len(cand) != len(ref):
        return [{"index": 0, "ok": False, "problem": f"{len(cand)} outputs, expected {len(ref)}"}]
    first_gradient = len(ref) - gradients
    return [compare_tensor(i, c, r, (gradient_override or override) if i >= first_gradient else override, device,
                           gradient=i >= first_gradient)
            for i, (c, r) in enumerate(zip(cand, ref))]
