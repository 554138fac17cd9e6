"""Worker-side loading: build an implementation's callable, make seeded inputs on the device and call it with
them. Importing the implementation is kforge_bot.evaluate.worker.importing."""

from __future__ import annotations

import inspect as _inspect  # the worker's own use; candidates may not import it
import random
import secrets
from types import ModuleType
from typing import Any, Callable

import torch

from kforge_bot.kernelspec import KernelSpec


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # seeds every device's default generator too
    try:  # numpy is optional for torch: seeded where it is there
        import numpy

        numpy.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover
        pass


def forget_seed() -> None:
    """Reseed every generator from the OS once seeded work is done: `torch.initial_seed()` (or the next random
    draw) would otherwise tell user code the evaluation's secret seed."""
    seed_everything(secrets.randbits(63))


def lookup(module: ModuleType, symbol: str, label: str) -> Any:
    if not hasattr(module, symbol):
        raise AttributeError(f"{label} defines no {symbol!r}")
    return getattr(module, symbol)


class DataInputs(list):  # type: ignore[type-arg]
    """One object's tensors (GPU MODE's `data`), flattened so that every check on inputs sees each of them, and the
    structure that rebuilds the object: `call` hands the callable one fresh object over the same tensors."""

    def __init__(self, leaves: list[Any], structure: Any) -> None:
        super().__init__(leaves)
        self.structure = structure

    def data(self) -> Any:
        from torch.utils import _pytree

        return _pytree.tree_unflatten(list.__iter__(self), self.structure)


def make_inputs(spec: KernelSpec, inputs_module: ModuleType, shape_set: dict[str, Any], seed: int,
                device: torch.device) -> list[Any]:
    """Fresh random inputs for one (shape set, seed), created directly on the device. Where the spec names the
    inputs callable's seed keyword (GPU MODE's `seed`), the harness's secret seed goes there too."""
    fn = lookup(inputs_module, spec.inputs_symbol, "the inputs module")
    kwargs = dict(shape_set)
    call_kwargs = {**spec.call_kwargs, **(kwargs.pop("kwargs", None) or {})}  # the entry's, not the inputs callable's
    try:
        if "device" in _inspect.signature(fn).parameters:
            kwargs["device"] = device
    except (TypeError, ValueError):
        pass
    if spec.seed_kwarg:
        kwargs[spec.seed_kwarg] = seed
    seed_everything(seed)
    try:
        with torch.device(device):
            values = fn(**kwargs)
    finally:
        forget_seed()
    if spec.data_arg:
        from torch.utils import _pytree

        leaves, structure = _pytree.tree_flatten(values)
        return DataInputs([v.to(device) if isinstance(v, torch.Tensor) and v.device != device else v
                           for v in leaves], structure)
    if isinstance(values, torch.Tensor):
        values = [values]
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{spec.inputs_symbol}() returned {type(values).__name__}; expected a list or tuple")
    moved = [v.to(device) if isinstance(v, torch.Tensor) and v.device != device else v for v in values]
    return moved + [CallKwargs(call_kwargs)] if call_kwargs else moved


class CallKwargs(tuple):  # type: ignore[type-arg]
    """An input set's keyword arguments for the entry (`kwargs:`), last in its inputs: every side's callable
    (keyword_call) takes it off and passes its items by name. Immutable: a kernel never holds it, only a copy."""

    def __new__(cls, kwargs: dict[str, Any]) -> CallKwargs:
        return super().__new__(cls, sorted(kwargs.items()))

    def values_for_call(self) -> dict[str, Any]:
        return {name: _dtype_or_value(value) for name, value in self}


def _dtype_or_value(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("torch."):
        found = getattr(torch, value.removeprefix("torch."), None)
        if isinstance(found, torch.dtype):
            return found
    return value


def keyword_call(fn: Callable[..., Any], names: list[str] | None = None) -> Callable[..., Any]:
    """`fn` called with an input set's CallKwargs (last of its arguments) passed by name. `names`: an
    autograd.Function's forward parameters, whose `apply` takes no keywords: they go by position, with the
    forward's defaults filling the gap."""
    defaults: dict[str, Any] = {}
    if names is not None:
        forward = getattr(getattr(fn, "__self__", None), "forward", None)
        try:
            params = list(_inspect.signature(forward).parameters.values())[1:] if forward else []
        except (TypeError, ValueError):
            params = []
        defaults = {p.name: p.default for p in params if p.default is not _inspect.Parameter.empty}

    def call(*args: Any) -> Any:
        if not args or type(args[-1]) is not CallKwargs:
            return fn(*args)
        kwargs = args[-1].values_for_call()
        positional = list(args[:-1])
        if names is None:
            return fn(*positional, **kwargs)
        for name in names[len(positional):]:
            if name not in kwargs and name not in defaults:
                break
            positional.append(kwargs.pop(name, defaults.get(name)))
        if kwargs:
            raise TypeError(f"the entry takes no keyword argument {next(iter(kwargs))!r}")
        return fn(*positional)

    return call


def init_args(spec: KernelSpec, inputs_module: ModuleType) -> tuple[list[Any], dict[str, Any]]:
    if spec.init_symbol:
        values = lookup(inputs_module, spec.init_symbol, "the inputs module")()
        return list(values) if isinstance(values, (list, tuple)) else [values], {}
    return [], dict(spec.init_kwargs)


def init_key(spec: KernelSpec, inputs_module: ModuleType) -> str:
    """What a module entry's constructor gets, as text: a KernelBench held-out variant may change it (its sizes
    are read by get_init_inputs), and a changed one is built again."""
    if not spec.init_symbol:
        return ""
    try:
        return repr(init_args(spec, inputs_module))
    except Exception as exc:  # noqa: BLE001 - the constructor's arguments fail: building the variant says why
        return f"error: {exc}"


def build_callable(obj: Any, spec: KernelSpec, inputs_module: ModuleType, device: torch.device,
                   seed: int, state_from: torch.nn.Module | None = None) -> Callable[..., Any]:
    """A function is called as is; an nn.Module class is built (seeded) with the spec's init inputs."""
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        args, kwargs = init_args(spec, inputs_module)
        module = _construct(obj, args, kwargs, seed, device)
        if state_from is not None:
            _copy_matching_state(state_from, module)
        return module.to(device).eval()
    keywords = bool(spec.call_kwargs) or any("kwargs" in s for s in spec.shape_sets)
    if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
        # Called through apply (its forward's arguments, without ctx).
        return keyword_call(obj.apply, _forward_names(obj)) if keywords else obj.apply
    if callable(obj):
        return keyword_call(obj) if keywords else obj
    raise TypeError(f"{type(obj).__name__} object is not callable")


def _forward_names(function: type) -> list[str]:
    try:
        return list(_inspect.signature(function.forward).parameters)[1:]  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return []


def _construct(cls: type, args: list[Any], kwargs: dict[str, Any], seed: int, device: torch.device) -> Any:
    """The module built (seeded) with its parameters created on the device, as the inputs are: initialised on the
    host, KernelBench L2 55's Linear(32768, 32768) took 9-13 s in each worker on the H200 host. An __init__ that
    cannot run there (host-only code) is built on the host instead; every side of an evaluation runs the same
    code on the same device, so seeded weights still agree (and matching ones are copied: _copy_matching_state)."""
    try:
        return _seeded_construct(cls, args, kwargs, seed, device)
    except _DEVICE_ERRORS:
        raise  # the device's own failure (memory, a fault), not host-only code: on the host it would get other weights
    except Exception:  # noqa: BLE001 - built on the host instead; the host's failure is the one reported
        if device.type == "cpu":
            raise
    return _seeded_construct(cls, args, kwargs, seed, torch.device("cpu"))


_DEVICE_ERRORS = tuple(e for e in (getattr(torch, "OutOfMemoryError", None), getattr(torch, "AcceleratorError", None))
                       if isinstance(e, type))


def _seeded_construct(cls: type, args: list[Any], kwargs: dict[str, Any], seed: int, place: torch.device) -> Any:
    seed_everything(seed)
    try:
        with torch.device(place):
            return cls(*args, **kwargs)
    finally:
        forget_seed()


def _copy_matching_state(source: torch.nn.Module, dest: torch.nn.Module) -> None:
    """Give the candidate the reference's weights when both hold the same named parameters and buffers.

    Seeded construction usually produces identical weights already; this also covers candidates that
    create their parameters in another order.
    """
    src = source.state_dict()
    dst = dest.state_dict()
    if src.keys() == dst.keys() and all(src[k].shape == dst[k].shape for k in src):
        dest.load_state_dict(src)


def share_matching_state(candidate: Any, baseline: Any) -> list[tuple[str, torch.Tensor]]:
    """Point the candidate's parameters and buffers at the baseline's storage wherever both hold the same
    name with the same shape, dtype, device and values; returns the shared tensors (the baseline's).

    Two copies of the same weights sit at different addresses, and where they sit moves a kernel's time: an
    A/A run of KernelBench's LayerNorm (16 blocks streaming 16 MB of weights each) read 1.009x with two
    instances, 0.991x with their roles swapped and 1.000x with one instance (benchmarks/aa_placement.py).
    Shared, both sides read the same bytes at the same place, so what is timed is the code. The candidate's
    own copies stay referenced from its module (`_kforge_unshared`), so anything that kept their pointers
    (a graph captured in __init__, say) still reads valid memory."""
    if not isinstance(candidate, torch.nn.Module) or not isinstance(baseline, torch.nn.Module) \
            or candidate is baseline:
        return []
    theirs = dict(baseline.named_parameters())
    theirs.update(baseline.named_buffers())
    shared: list[tuple[str, torch.Tensor]] = []
    kept: list[torch.Tensor] = []
    with torch.no_grad():
        for name, mine in [*candidate.named_parameters(), *candidate.named_buffers()]:
            other = theirs.get(name)
            if other is None or other is mine or type(other) is not type(mine) or other.shape != mine.shape \
                    or other.dtype != mine.dtype or other.device != mine.device or other.layout != torch.strided \
                    or mine.layout != torch.strided or not torch.equal(other, mine):
                continue
            kept.append(mine.data)
            mine.data = other.data
            shared.append((name, other))
    if kept:
        object.__setattr__(candidate, "_kforge_unshared", kept)  # not a submodule or parameter: invisible to state
    return shared


def call(fn: Callable[..., Any], inputs: list[Any]) -> Any:
    with torch.no_grad():
        if isinstance(inputs, DataInputs):
            return fn(inputs.data())  # one object, rebuilt for every call over the same tensors
        return fn(*inputs)
