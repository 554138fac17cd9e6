"""Worker-side loading: import an Implementation, build its callable, make seeded inputs on the device."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import inspect as _inspect  # the worker's own use; candidates may not import it
import os
import random
import secrets
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

from kforge_bot.evaluate.worker import device_import
from kforge_bot.evaluate.worker.worker_io import short_error
from kforge_bot.spec import Implementation, KernelSpec


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


def import_implementation(impl: Implementation, workdir: Path, tag: str,
                          support: tuple[tuple[str, str], ...] = ()) -> ModuleType:
    """_import_implementation's module; where it fails asking for a GPU this machine lacks, NeedsDevice."""
    try:
        return _import_implementation(impl, workdir, tag, support)
    except Exception as exc:
        device_import.raise_if_needs_device(impl.module, impl.filename, exc, short_error(exc))
        raise


def _import_implementation(impl: Implementation, workdir: Path, tag: str,
                           support: tuple[tuple[str, str], ...] = ()) -> ModuleType:
    """Write the source to `workdir/<tag>_code/<filename>` and import it as a fresh module named for its role
    (each role is imported once in a worker). The spec's `support` modules (GPU MODE's task.py, utils.py) are
    written beside it and imported from there (by their names, once per process, as GPU MODE's evaluator does:
    torch.compile looks them up by name; the candidate's worker watches the baseline's helpers,
    snapshot.trusted_namespaces)."""
    digest = impl.digest
    extensions_root = os.environ.get("KFORGE_EXTENSIONS_ROOT")
    if extensions_root:
        # Compile-ahead (kforge_bot.scale.pool): each source builds its torch extensions in its own folder, so a
        # build made earlier in another process (same source, same import order) is found again, not redone.
        os.environ["TORCH_EXTENSIONS_DIR"] = _extensions_dir(Path(extensions_root) / digest, workdir)
    # Names and paths say the role alone, never which source: a kernel that could tell the base's from its own
    # (a digest in a module name, say) could tell a comparison from any other run and fail only there.
    folder = workdir / f"{tag}_code"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / impl.filename
    path.write_text(impl.source, encoding="utf-8")
    for name, text in support:
        (folder / name).write_text(text, encoding="utf-8")
    if impl.module:
        return _import_in_package(impl, path)
    module_name = f"_kforge_{tag}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {impl.filename}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    if not impl.root:
        spec.loader.exec_module(module)
        return module
    # Each implementation gets its own copies of its repository's local modules: a base and a head checkout
    # (or a candidate) may both say `import helper` and mean different files. Local modules another
    # implementation loaded are set aside during this import, and the ones this import loads are set aside
    # after it; every module keeps the objects it imported.
    root = Path(impl.root).resolve()
    _read_source_only(root)
    aside = {name: mod for name, mod in sys.modules.items() if _local_to_other_root(mod, root)}
    for name in aside:
        del sys.modules[name]
    before = set(sys.modules)
    sys.path.insert(0, str(root))
    if support:
        sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(root))
        if support:
            sys.path.remove(str(folder))
        if str(root) not in sys.path:
            sys.path.append(str(root))  # late imports inside kernels still resolve
        for name in set(sys.modules) - before:
            if _local_to(sys.modules[name], root):
                _LOCAL_ROOTS.add(root)
                del sys.modules[name]
        for name, mod in aside.items():
            sys.modules.setdefault(name, mod)
    return module


def import_as_written(impl: Implementation, workdir: Path, tag: str) -> ModuleType:
    """An implementation as its files have it (`list --import`): a module of a package is imported by its name from
    its import roots and stays imported, so the next kernel of the same library finds the package loaded (one import
    of the library per worker); anything else, or a package imported without its __init__, as import_implementation
    does. Never for a candidate: it serves no text but the files'."""
    if not impl.module or not impl.package_init:
        return import_implementation(impl, workdir, tag)
    roots = [Path(p).resolve() for p in impl.paths] + ([Path(impl.root).resolve()] if impl.root else [])
    for root in roots:
        _read_source_only(root)
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
    try:
        return importlib.import_module(impl.entry_module or impl.module)
    except Exception as exc:
        device_import.raise_if_needs_device(impl.module, impl.filename, exc, short_error(exc))
        raise


class _SourceAs(importlib.abc.MetaPathFinder):
    """Serves one module name from a given file: the implementation's text stands where its package has the
    kernel's file, for every importer (the launcher, the package's own __init__)."""

    def __init__(self, name: str, path: Path) -> None:
        self.name, self.path = name, path

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path,
                                                      loader=_SourceOnlyLoader(fullname, str(self.path)))


def _import_in_package(impl: Implementation, path: Path) -> ModuleType:
    """Import `impl` as module `impl.module` of its package, with its import roots and its folder on sys.path, and
    return the module its entry lives in (`impl.entry_module`, a launcher, or the kernel's own). Each
    implementation gets its own copies of the package's modules: they are taken out of sys.modules afterwards
    (every module keeps the objects it imported), so the next implementation imports them afresh with its text."""
    roots = [Path(p).resolve() for p in impl.paths] + ([Path(impl.root).resolve()] if impl.root else [])
    for root in roots:
        _read_source_only(root)
    finder = _SourceAs(impl.module, path)
    packaged = [impl.module, *([impl.entry_module] if impl.entry_module else [])]
    # Whatever an earlier implementation left (a package's parents, the kernel's module) is imported afresh.
    aside = {name: mod for name, mod in sys.modules.items()
             if any(name == m or name.startswith(m.split(".")[0] + ".") or name == m.split(".")[0] for m in packaged)
             or any(_local_to(mod, r) for r in roots) or _local_to_other_root(mod, roots[0] if roots else path)}
    for name in aside:
        del sys.modules[name]
    before = set(sys.modules)
    added = [str(r) for r in roots if str(r) not in sys.path]
    sys.path[:0] = added
    sys.meta_path.insert(0, finder)
    stubs = [] if impl.package_init else _empty_packages(packaged, roots)
    try:
        module = importlib.import_module(impl.entry_module or impl.module)
    finally:
        sys.meta_path.remove(finder)
        for name in stubs:
            sys.modules.pop(name, None)
        for name in set(sys.modules) - before:
            mod = sys.modules[name]
            if name in packaged or any(_local_to(mod, r) for r in roots) or _local_to(mod, path.parent):
                _LOCAL_ROOTS.update(roots)
                del sys.modules[name]
        for name, mod in aside.items():
            sys.modules.setdefault(name, mod)
    return module


def _empty_packages(modules: list[str], roots: list[Path]) -> list[str]:
    """The packages above `modules`, put in sys.modules as empty packages over their folders (`package_init:
    false`): their submodules import, their __init__.py never runs. Returns the names put there."""
    made: list[str] = []
    for dotted in modules:
        parts = dotted.split(".")
        for depth in range(1, len(parts)):
            name = ".".join(parts[:depth])
            if name in sys.modules:
                continue
            folders = [str(r.joinpath(*parts[:depth])) for r in roots if r.joinpath(*parts[:depth]).is_dir()]
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = folders
            package = importlib.util.module_from_spec(spec)
            sys.modules[name] = package
            if depth > 1:
                setattr(sys.modules[".".join(parts[:depth - 1])], parts[depth - 1], package)
            made.append(name)
    return made


def _extensions_dir(shared: Path, workdir: Path) -> str:
    """The shared build folder where this process may write it (unsandboxed); in the sandbox, where no process
    writes the shared folders, a private copy at the same path in every sandbox (KFORGE_EXTENSIONS_PRIVATE,
    see isolation.EXTENSIONS_MOUNT: ninja rebuilds a build moved to another path). A compile-ahead child
    builds its own source there and the bot publishes it; no process can plant a build that another source's
    import would load."""
    try:
        shared.mkdir(parents=True, exist_ok=True)
        if os.access(shared, os.W_OK):
            probe = shared / ".kforge-write-probe"
            probe.touch()
            probe.unlink()
            return str(shared)
    except OSError:
        pass  # read-only in this sandbox
    private = Path(os.environ.get("KFORGE_EXTENSIONS_PRIVATE") or workdir / "extensions") / shared.name
    if not private.exists():
        if shared.is_dir():
            shutil.copytree(shared, private, symlinks=True)
        private.mkdir(parents=True, exist_ok=True)
    return str(private)


_LOCAL_ROOTS: set[Path] = set()
_SOURCE_ONLY: set[str] = set()


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the source every time: never a repository's own `__pycache__` (a committed `.pyc` that need
    not match the source a reviewer read), and never writes one into the checkout."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


def _source_only_finder(entry: str) -> importlib.machinery.FileFinder:
    # An environment inside the repository (a checkout's .venv) keeps its installed bytecode: not local code.
    if not any(entry == root or entry.startswith(root + os.sep) for root in _SOURCE_ONLY) \
            or {"site-packages", "dist-packages"} & set(Path(entry).parts):
        raise ImportError("not an implementation's folder")  # the next hook's
    return importlib.machinery.FileFinder(entry, (_SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES),
                                          (importlib.machinery.ExtensionFileLoader,
                                           importlib.machinery.EXTENSION_SUFFIXES))


def _read_source_only(root: Path) -> None:
    """Modules under an implementation's root load from their `.py` source only: a sourceless `.pyc` is not a
    module there, and a cached one beside its source is not read."""
    if _source_only_finder not in sys.path_hooks:
        sys.path_hooks.insert(0, _source_only_finder)
    if str(root) not in _SOURCE_ONLY:
        _SOURCE_ONLY.add(str(root))
        for entry in [e for e in sys.path_importer_cache if e == str(root) or e.startswith(str(root) + os.sep)]:
            del sys.path_importer_cache[entry]  # a finder made before: made again by the hook


def _module_file(mod: object) -> Path | None:
    file = getattr(mod, "__file__", None)
    if not file:
        return None
    try:
        return Path(file).resolve()
    except (OSError, RuntimeError):
        return None


def _local_to(mod: object, root: Path) -> bool:
    file = _module_file(mod)
    return file is not None and file.is_relative_to(root)


def _local_to_other_root(mod: object, root: Path) -> bool:
    file = _module_file(mod)
    return file is not None and any(file.is_relative_to(r) for r in _LOCAL_ROOTS if r != root) \
        and not file.is_relative_to(root)


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
