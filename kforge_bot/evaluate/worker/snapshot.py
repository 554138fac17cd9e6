"""What the worker records before the candidate is imported, and compares after each phase.

- `FunctionSnapshot`: identities of the framework's, the clock's and the harness's callables, and for each
  Python function its seal (code object, defaults, the callables in its closure), so a monkey-patch (of a
  timer, a comparison, the baseline, by assignment or by swapping a function's `__code__`) is a rejection
  rather than a silent lie. `hide_harness` takes the harness's modules out of sys.modules before the
  candidate is imported.
- `framework_state` / `restore_framework_state`: process-wide framework settings (threads, default dtype,
  TF32, ...) a candidate could leave changed to slow the baseline timed after it.

Not the last word either: correctness is decided by comparing outputs against a reference computed in another
process, and timing by the device's own clock; these checks turn the known tricks into a clear verdict.
"""

from __future__ import annotations

import os
import sys
import types
from types import ModuleType
from typing import Any

import torch

_WATCHED_MODULES = (
    "torch", "torch.nn.functional", "torch.testing", "torch.cuda", "torch.xpu", "torch.mps", "torch.linalg",
    "torch.fft", "torch.special", "torch.profiler", "torch.autograd", "torch.autograd.profiler", "time", "math",
    "builtins", "os", "sys", "random", "json", "pickle", "numpy", "socket", "kforge_bot.evaluate.worker.entry",
    "kforge_bot.evaluate.worker.worker_io", "kforge_bot.evaluate.worker.candidate_role",
    "kforge_bot.evaluate.worker.shape_timing", "kforge_bot.evaluate.worker.correctness_cases",
    "kforge_bot.evaluate.wire.checks", "kforge_bot.evaluate.wire.stats", "kforge_bot.evaluate.wire.timing",
    "kforge_bot.evaluate.wire.graphs", "kforge_bot.evaluate.wire.paired_times",
    "kforge_bot.evaluate.worker.loading", "kforge_bot.evaluate.worker.importing",
    "kforge_bot.evaluate.worker.shipped_inputs", "kforge_bot.evaluate.wire.shipped",
    "kforge_bot.evaluate.worker.guards", "kforge_bot.evaluate.worker.snapshot", "kforge_bot.evaluate.worker.profile",
    "kforge_bot.evaluate.wire.outputs", "kforge_bot.evaluate.wire.devshare", "kforge_bot.evaluate.wire.tensorfile",
    "kforge_bot.targets.base", "kforge_bot.targets.cpu", "kforge_bot.targets.cuda", "kforge_bot.targets.xpu",
    "kforge_bot.targets.mps",
)
# Classes are read with their inherited attributes: assigning torch.Tensor.fill_ shadows the method that
# torch._C.TensorBase defines, and the harness calls it (to poison the baseline's outputs) all the same.
_WATCHED_CLASSES = ("torch.Tensor", "torch.cuda.Event", "torch.cuda.Stream", "torch.nn.Module",
                    "torch.Generator", "torch.cuda.graphs.CUDAGraph", "torch.autograd.grad_mode.no_grad",
                    "kforge_bot.targets.base.Target", "kforge_bot.targets.base.HostTimer",
                    "kforge_bot.targets.cpu.CpuTarget", "kforge_bot.targets.cuda.CudaTarget",
                    "kforge_bot.targets.cuda.CudaEventTimer", "kforge_bot.targets.xpu.XpuTarget",
                    "kforge_bot.targets.mps.MpsTarget", "kforge_bot.evaluate.worker.worker_io.Channel",
                    # The candidate role's guards and phases, its correctness calls, and one shape set's timing
                    # and its callbacks.
                    "kforge_bot.evaluate.worker.candidate_role.CandidateRun",
                    "kforge_bot.evaluate.worker.correctness_cases.CorrectnessCases",
                    "kforge_bot.evaluate.worker.shape_timing.ShapeTiming",
                    # Where a head's inputs, arguments and weights come from when shipped (Plan.ship_inputs).
                    "kforge_bot.evaluate.worker.shipped_inputs.ShippedInputs",
                    "kforge_bot.evaluate.worker.shipped_inputs.StateHolder",
                    "kforge_bot.evaluate.wire.graphs.GraphReplays", "kforge_bot.evaluate.wire.timing.RepeatCheck",
                    "kforge_bot.evaluate.wire.timing.PairLoop",
                    # How outputs leave the worker: a save that computed the answer only then would hide a
                    # timed call that never did.
                    "kforge_bot.evaluate.wire.outputs.FileSink", "kforge_bot.evaluate.wire.outputs.DeviceSink",
                    "kforge_bot.evaluate.wire.devshare.ExportedBuffer", "socket.socket")
# What the harness itself calls between two candidate calls while timing: checked after every timed
# candidate sample (the whole snapshot is checked after every correctness call and every phase).
CRITICAL = (
    "time", "builtins", "torch.cuda.Event", "kforge_bot.evaluate.wire.checks", "kforge_bot.evaluate.wire.timing",
    "kforge_bot.evaluate.wire.sample",
    "kforge_bot.evaluate.worker.loading", "kforge_bot.evaluate.worker.importing", "kforge_bot.targets.base.HostTimer",
    "kforge_bot.targets.cuda.CudaEventTimer",
    "kforge_bot.targets.cpu.CpuTarget", "kforge_bot.targets.cuda.CudaTarget", "kforge_bot.targets.base.Target",
    "torch.equal", "torch.save", "torch.no_grad", "torch.isfinite", "torch.cuda.synchronize",
    "torch.cuda.current_stream", "torch.Tensor.fill_", "torch.Tensor.clone", "torch.Tensor.copy_",
    "torch.Tensor.detach", "torch.Tensor.cpu", "torch.Tensor.numel", "torch.Tensor.is_floating_point",
    "torch.Tensor.data_ptr", "torch.Tensor.untyped_storage", "torch.Tensor.layout", "torch.Tensor.device",
    "torch.Tensor.is_meta", "torch.Tensor.nan_to_num", "torch.Tensor.__eq__",
    # measure_pair's callbacks (ShapeTiming's), the guards they run (CandidateRun's) and the progress messages;
    # the correctness calls (CorrectnessCases), checked here as when they were CandidateRun's own.
    "kforge_bot.evaluate.worker.candidate_role", "kforge_bot.evaluate.worker.candidate_role.CandidateRun",
    "kforge_bot.evaluate.worker.shape_timing", "kforge_bot.evaluate.worker.shape_timing.ShapeTiming",
    "kforge_bot.evaluate.worker.correctness_cases", "kforge_bot.evaluate.worker.correctness_cases.CorrectnessCases",
    "kforge_bot.evaluate.worker.worker_io",
    "kforge_bot.evaluate.worker.worker_io.Channel", "kforge_bot.evaluate.wire.graphs",
    "kforge_bot.evaluate.wire.graphs.GraphReplays",
    "kforge_bot.evaluate.wire.timing.RepeatCheck", "kforge_bot.evaluate.wire.timing.PairLoop",  # the loop's steps
    "kforge_bot.evaluate.wire.paired_times",
    "torch.cuda.graphs.CUDAGraph",  # every timed call of a short kernel is a replay
)
# Attributes that legitimately change after import (lazy initialisation and counters).
_IGNORED = {"sys.modules", "sys.path", "sys.path_importer_cache", "sys.meta_path", "sys.path_hooks",
            "sys.stdout", "sys.stderr", "sys.stdin", "sys.last_exc", "sys.last_type", "sys.last_value",
            "sys.last_traceback", "sys.exc_info", "os.environ"}
_RECORDED_TYPES = (staticmethod, classmethod, property, types.GetSetDescriptorType, types.MemberDescriptorType)
_MISSING = object()


def _trusted_roots() -> tuple[str, ...]:
    roots = []
    for name in ("torch", "triton", "functools"):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            # A package's folder; a single-file stdlib module stands for itself only.
            roots.append(os.path.dirname(path) + os.sep if path.endswith("__init__.py") else path)
    return tuple(roots)


def _framework_rewrap(new: Any, original: Any) -> bool:
    """True for the framework wrapping its own function (torch._dynamo wraps torch.manual_seed on import).

    Both must hold: the replacement's code lives in the framework (a candidate's function has its code in
    the candidate's file), and it wraps the very object it replaced, through `__wrapped__` (functools.wraps)
    or a closure (torch.compile's dynamo replaces nn.Module.__init__ with a closure calling the original),
    so borrowing some other framework function, say `torch.equal = torch.is_tensor`, is still a patch.
    """
    func = getattr(new, "__func__", new)
    code = getattr(func, "__code__", None)
    if code is None or not code.co_filename.startswith(_trusted_roots()):
        return False
    for cell in getattr(func, "__closure__", None) or ():
        try:
            if cell.cell_contents is original:
                return True
        except ValueError:  # an empty cell
            continue
    inner = func
    for _ in range(4):
        inner = getattr(inner, "__wrapped__", None)
        if inner is None:
            return False
        if inner is original or getattr(inner, "__func__", _MISSING) is original:
            return True
    return False


def _resolve(dotted: str) -> Any:
    module_name, _, attr = dotted.rpartition(".")
    module = sys.modules.get(module_name)
    return getattr(module, attr, None) if module is not None else None


def _holder(name: str) -> Any:
    module = sys.modules.get(name)
    return module if module is not None else _resolve(name)


def _namespace(holder: Any) -> dict[str, Any]:
    """What attribute lookup finds, without running descriptors: a module's globals, or a class's own and
    inherited attributes (nearest class wins, as in the MRO); a dict (a function's globals) is itself."""
    if isinstance(holder, dict):
        return holder
    if isinstance(holder, type):
        merged: dict[str, Any] = {}
        for klass in reversed(holder.__mro__):
            if klass is not object:
                merged.update(vars(klass))
        return merged
    if isinstance(holder, ModuleType):
        return vars(holder)
    return {}


def _lookup(cls: type, attr: str) -> Any:
    for klass in cls.__mro__:
        found = vars(klass)
        if attr in found:
            return found[attr]
    return _MISSING


def seal(obj: Any) -> tuple[Any, ...]:
    """What makes a Python function do what it does besides its identity: its code object, defaults and the
    callables in its closure. Assigning `f.__code__` keeps `f` the same object; the seal changes."""
    func = getattr(obj, "__func__", obj)  # methods, staticmethod and classmethod objects
    if isinstance(obj, property):
        return tuple(seal(f) for f in (obj.fget, obj.fset, obj.fdel))
    if not isinstance(func, types.FunctionType):
        return ()
    cells = []
    for cell in func.__closure__ or ():
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell
            content = None
        # Callables only: a closure's counters and caches change by design, the function it calls must not.
        cells.append(id(content) if callable(content) else None)
    return (func.__code__, func.__defaults__, func.__kwdefaults__, tuple(cells))


class FunctionSnapshot:
    """The callables of the watched modules and classes, as objects, at one moment.

    `changed()` names every watched attribute that now holds another object: a monkey-patch of the
    framework, the clock, the harness or the baseline.
    """

    def __init__(self, extra: dict[str, Any] | None = None, holders: dict[str, Any] | None = None) -> None:
        self._spaces: dict[str, tuple[Any, dict[str, Any]]] = {}  # name -> (holder, {attr: object})
        self._seals: dict[str, dict[str, tuple[Any, ...]]] = {}  # name -> {attr: seal of the object}
        for name in _WATCHED_MODULES + _WATCHED_CLASSES:
            holder = _holder(name)
            if isinstance(holder, (ModuleType, type)):
                recorded = self._recorded(name, _namespace(holder))
                self._spaces[name] = (holder, recorded)
                self._seals[name] = {attr: seal(value) for attr, value in recorded.items()}
        # Namespaces held as objects, not looked up by name (trusted_namespaces: the baseline's own code).
        self._held = set(holders or {})
        for name, holder in (holders or {}).items():
            recorded = {attr: value for attr, value in _namespace(holder).items()
                        if callable(value) or isinstance(value, _RECORDED_TYPES)}
            self._spaces[name] = (holder, recorded)
            self._seals[name] = {attr: seal(value) for attr, value in recorded.items()}
        self._extra = dict(extra or {})
        self._extra_seals = {label: seal(obj) for label, obj in self._extra.items()}

    @staticmethod
    def _recorded(prefix: str, namespace: dict[str, Any]) -> dict[str, Any]:
        kept = {}
        for attr, value in list(namespace.items()):
            if f"{prefix}.{attr}" in _IGNORED or attr.startswith("__") and attr not in ("__init__", "__call__", "__eq__"):
                continue
            if callable(value) or isinstance(value, _RECORDED_TYPES):
                kept[attr] = value
        return kept

    def changed(self, extra_now: dict[str, Any] | None = None, only: tuple[str, ...] | None = None) -> list[str]:
        """Watched names whose object is no longer the one recorded (`only`: just these, for speed)."""
        changes: list[str] = []
        held: list[str] = []  # named after the baseline's own entries, which say it more plainly
        for name, attrs in self._selection(only):
            holder, recorded = self._spaces[name]
            out = held if name in self._held else changes
            # The harness's own modules leave sys.modules before the candidate is imported (hide_harness).
            now_holder = holder if name.startswith("kforge_bot") or name in self._held else _holder(name)
            if now_holder is not holder and isinstance(holder, ModuleType):
                out.append(f"{name} (module replaced in sys.modules)")
                continue
            # A few attributes of a class: look each up along the MRO rather than merging every dict.
            namespace = _namespace(holder) if len(attrs) > 64 or not isinstance(holder, type) else None
            for attr in attrs:
                value = namespace.get(attr, _MISSING) if namespace is not None else _lookup(holder, attr)
                original = recorded[attr]
                if value is _MISSING:
                    out.append(f"{name}.{attr} (deleted)")
                elif value is not original and not _framework_rewrap(value, original):
                    out.append(f"{name}.{attr}")
                elif value is original and seal(value) != self._seals[name][attr]:
                    out.append(f"{name}.{attr} (its code, defaults or closure)")
        for label, obj in (extra_now or {}).items():
            if label in self._extra and obj is not self._extra[label]:
                changes.append(label)
            elif label in self._extra and seal(obj) != self._extra_seals[label]:
                changes.append(f"{label} (its code, defaults or closure)")
        return changes or held  # the plainer names first; the baseline's namespaces where nothing else says it

    @property
    def held(self) -> tuple[str, ...]:
        return tuple(sorted(self._held))

    def _selection(self, only: tuple[str, ...] | None) -> list[tuple[str, Any]]:
        if only is None:
            return [(name, list(recorded)) for name, (_, recorded) in self._spaces.items()]
        picked: dict[str, list[str]] = {}
        for key in only:
            if key in self._spaces:
                picked[key] = list(self._spaces[key][1])
                continue
            name, _, attr = key.rpartition(".")
            if name in self._spaces and attr in self._spaces[name][1]:
                picked.setdefault(name, []).append(attr)
        return list(picked.items())


def trusted_namespaces(modules: dict[str, ModuleType], roots: tuple[str, ...]) -> dict[str, Any]:
    """The namespaces of the code the harness imported before the candidate (the baseline, the reference, the
    inputs, the problem's own check) that live in their own files: each module's globals, the globals of every
    function of theirs those reach (a helper module such as GPU MODE's utils.py, gone from sys.modules but held
    by the functions that use it), and every class of theirs with all its attributes, dunders included. A
    candidate can reach these objects without sys.modules (`object.__subclasses__()`), and a patched helper
    (a context manager's `__enter__` that sleeps) slows the baseline, not the candidate: watched like the
    framework, by identity and seal. `roots`: the folders their source files lie under."""

    def own(filename: str) -> bool:  # an environment inside the checkout (its .venv) is installed code, not its own
        return filename.startswith(roots) and not any(p in filename for p in ("site-packages", "dist-packages"))

    def local(obj: Any) -> bool:
        code = getattr(getattr(obj, "__func__", obj), "__code__", None)
        return code is not None and own(code.co_filename)

    found: dict[str, Any] = {}
    seen: set[int] = set()
    queue: list[tuple[str, Any]] = [(label, vars(module)) for label, module in modules.items()]
    while queue:
        label, space = queue.pop(0)  # breadth first, in the order given: the baseline names what it shares
        if id(space) in seen:
            continue
        seen.add(id(space))
        found[label] = space
        for attr, value in list(_namespace(space).items()):
            if isinstance(value, ModuleType) and own(str(getattr(value, "__file__", "") or "")):
                queue.append((f"{value.__name__} (module)", vars(value)))
            elif isinstance(value, type) and any(local(v) for v in vars(value).values()):
                if id(value) not in seen:
                    seen.add(id(value))
                    found[f"{label}.{attr} (class)"] = value
                    queue.extend((f"{getattr(v, '__module__', '?')} (module)", v.__globals__)
                                 for v in vars(value).values() if isinstance(v, types.FunctionType) and local(v))
            elif isinstance(value, types.FunctionType) and local(value):
                queue.append((f"{value.__module__} (module)", value.__globals__))
    return found


def hide_harness() -> None:
    """Take the harness's modules out of sys.modules, so candidate code cannot look them up by name and patch
    the objects the harness runs on (the worker keeps its own references; an `import kforge_bot...` in a
    candidate then loads a fresh, unused copy)."""
    for name in [n for n in sys.modules if n == "kforge_bot" or n.startswith("kforge_bot.")]:
        del sys.modules[name]


# --------------------------------------------------------------------------------- framework state

def _backend_flags() -> list[tuple[str, Any, str]]:
    backends = torch.backends
    flags = [("torch.backends.cudnn", backends.cudnn, name) for name in ("enabled", "benchmark", "deterministic",
                                                                          "allow_tf32")]
    flags += [("torch.backends.cuda.matmul", backends.cuda.matmul, name)
              for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                           "allow_bf16_reduced_precision_reduction")]
    flags.append(("torch.backends.mkldnn", backends.mkldnn, "enabled"))
    return [(f"{prefix}.{name}", holder, name) for prefix, holder, name in flags if hasattr(holder, name)]


def framework_state() -> dict[str, Any]:
    """Process-wide framework settings that change how fast (or how precisely) the *next* call runs.

    A candidate that leaves them changed (one thread, TF32 off, ...) slows the baseline timed after it;
    the worker puts them back after every candidate call and reports what it had to restore.
    """
    state: dict[str, Any] = {
        "torch.get_num_threads()": torch.get_num_threads(),
        "torch.get_default_dtype()": torch.get_default_dtype(),
        "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled(),
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
    }
    for label, holder, name in _backend_flags():
        state[label] = getattr(holder, name)
    return state


def restore_framework_state(saved: dict[str, Any]) -> list[str]:
    """Put back whatever differs from `saved`; returns 'name: now -> saved' for each setting restored."""
    now = framework_state()
    restored = []
    setters = {
        "torch.get_num_threads()": torch.set_num_threads,
        "torch.get_default_dtype()": torch.set_default_dtype,
        "torch.are_deterministic_algorithms_enabled()": torch.use_deterministic_algorithms,
        "torch.get_float32_matmul_precision()": torch.set_float32_matmul_precision,
    }
    flags = {label: (holder, name) for label, holder, name in _backend_flags()}
    for label, value in saved.items():
        if now.get(label) == value:
            continue
        restored.append(f"{label}: {now.get(label)} -> {value}")
        if label in setters:
            setters[label](value)
        elif label in flags:
            setattr(flags[label][0], flags[label][1], value)
    return restored
