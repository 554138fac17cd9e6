"""Defences that look at what a candidate is, rather than what it computes.

- `static_findings(source)`: an AST scan for the reward hacks that need a recognisable construct: reading
  other objects through the garbage collector or stack frames, leaving the process early, writing to
  inherited file descriptors, patching the framework or the clock by assignment, importing the harness.
- `FunctionSnapshot`: identities of the framework's, the clock's and the harness's callables, and for each
  Python function its seal (code object, defaults, the callables in its closure), taken before the candidate
  is imported and compared after each phase, so a monkey-patch (of a timer, a comparison, the baseline,
  by assignment or by swapping a function's `__code__`) is a rejection rather than a silent lie.

Neither is the last word: correctness is decided by comparing outputs against a reference computed in
another process, and timing by the device's own clock; these checks turn the known tricks into a clear
verdict and a reason.
"""

from __future__ import annotations

import ast
import os
import sys
import types
from dataclasses import dataclass
from types import ModuleType
from typing import Any

# Modules whose import has no place in a kernel and every place in a hack.
FORBIDDEN_IMPORTS = {
    "gc": "the garbage collector can hand over other objects' results (e.g. the reference output)",
    "inspect": "stack and frame inspection can read or rewrite the harness's state",
    "atexit": "exit handlers can forge a result after the harness finished",
    "signal": "signal handlers can interfere with the harness's timeouts",
    "kforge_bot": "a candidate must not reach into the harness",
    "faulthandler": "it can rewrite how crashes are reported",
}
FORBIDDEN_CALLS = {
    ("sys", "_getframe"): "frame inspection can read or rewrite the harness's state",
    ("sys", "settrace"): "tracing hooks can rewrite the harness's state",
    ("sys", "setprofile"): "profiling hooks can rewrite the harness's state",
    ("sys", "exit"): "exiting early leaves a half-finished evaluation",
    ("os", "_exit"): "exiting early leaves a half-finished evaluation",
    ("os", "kill"): "signalling processes is not a kernel's business",
    ("os", "write"): "writing to raw file descriptors can forge the harness's result channel",
    ("os", "fdopen"): "opening inherited file descriptors can forge the harness's result channel",
    ("os", "dup2"): "redirecting file descriptors can forge the harness's result channel",
    ("builtins", "setattr"): "setattr() can patch the framework, the clock or the harness under any name",
    ("builtins", "eval"): "code assembled at run time escapes this review",
    ("builtins", "exec"): "code assembled at run time escapes this review",
}
FORBIDDEN_NAMES = {
    "__builtins__": "patching builtins changes how the harness works",
    "_getframe": "frame inspection can read or rewrite the harness's state",
    "f_back": "frame inspection can read or rewrite the harness's state",
    "f_locals": "frame inspection can read or rewrite the harness's state",
    "f_globals": "frame inspection can read or rewrite the harness's state",
    "gi_frame": "frame inspection can read or rewrite the harness's state",
    "tb_frame": "frame inspection can read or rewrite the harness's state",
    "get_objects": "the garbage collector can hand over other objects' results",
    "get_referrers": "the garbage collector can hand over other objects' results",
}
_FORBIDDEN_STRINGS = {**{name: why for name, why in FORBIDDEN_NAMES.items()},
                      **{attr: why for (module, attr), why in FORBIDDEN_CALLS.items() if module != "builtins"}}
PATCHABLE_ROOTS = {"torch", "time", "math", "numpy", "np", "F", "triton", "builtins", "os", "sys"}


@dataclass(frozen=True)
class Finding:
    line: int
    what: str
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.what} ({self.why})"


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def static_findings(source: str) -> list[Finding]:
    """Constructs in a candidate's source that only a reward hack needs."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the import in the worker reports syntax errors as compile errors
    findings: list[Finding] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in FORBIDDEN_IMPORTS:
                    findings.append(Finding(line, f"import {alias.name}", FORBIDDEN_IMPORTS[root]))
        elif isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if root in FORBIDDEN_IMPORTS:
                findings.append(Finding(line, f"from {node.module} import ...", FORBIDDEN_IMPORTS[root]))
            for alias in node.names:
                if (root, alias.name) in FORBIDDEN_CALLS:
                    findings.append(Finding(line, f"from {root} import {alias.name}",
                                            FORBIDDEN_CALLS[(root, alias.name)]))
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name:
                parts = name.split(".")
                key = (parts[-2], parts[-1]) if len(parts) >= 2 else ("builtins", parts[-1])
                if key in FORBIDDEN_CALLS:
                    findings.append(Finding(line, f"call to {name}()", FORBIDDEN_CALLS[key]))
                if parts[-1] in ("setattr", "delattr") and node.args:
                    target = _dotted(node.args[0])
                    if target and target.split(".")[0] in PATCHABLE_ROOTS:
                        findings.append(Finding(line, f"{parts[-1]}({target}, ...)",
                                                "patching the framework or the clock changes what is measured"))
                if parts[-1] == "__import__" or name in ("importlib.import_module",):
                    arg = node.args[0] if node.args else None
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                            and arg.value.split(".")[0] in FORBIDDEN_IMPORTS:
                        findings.append(Finding(line, f"dynamic import of {arg.value}",
                                                FORBIDDEN_IMPORTS[arg.value.split(".")[0]]))
                    elif not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                        findings.append(Finding(line, f"{name}() of a computed module name",
                                                "a name built at run time hides which module is imported"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                dotted = _dotted(target) if isinstance(target, ast.Attribute) else None
                if dotted and dotted.split(".")[0] in PATCHABLE_ROOTS:
                    findings.append(Finding(line, f"assignment to {dotted}",
                                            "patching the framework or the clock changes what is measured"))
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_NAMES:
            findings.append(Finding(line, f"use of .{node.attr}", FORBIDDEN_NAMES[node.attr]))
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            findings.append(Finding(line, f"use of {node.id}", FORBIDDEN_NAMES[node.id]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "/proc/self/fd" in node.value:
            findings.append(Finding(line, "reference to /proc/self/fd",
                                    "opening inherited file descriptors can forge the harness's result channel"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in _FORBIDDEN_STRINGS:
            # getattr(sys, "_getframe") and friends: the same attribute, named by a string.
            findings.append(Finding(line, f"the string {node.value!r}", _FORBIDDEN_STRINGS[node.value]))
    # One finding per line is enough to explain; keep the first.
    seen: set[int] = set()
    unique = []
    for finding in sorted(findings, key=lambda f: f.line):
        if finding.line not in seen:
            seen.add(finding.line)
            unique.append(finding)
    return unique


# ------------------------------------------------------------------------------------ patch detection

_WATCHED_MODULES = (
    "torch", "torch.nn.functional", "torch.testing", "torch.cuda", "torch.xpu", "torch.mps", "torch.linalg",
    "torch.fft", "torch.special", "torch.profiler", "torch.autograd", "torch.autograd.profiler", "time", "math",
    "builtins", "os", "sys", "random", "json", "pickle", "numpy", "kforge_bot.evaluate.worker",
    "kforge_bot.evaluate.checks", "kforge_bot.evaluate.stats", "kforge_bot.evaluate.timing",
    "kforge_bot.evaluate.loading", "kforge_bot.evaluate.guards", "kforge_bot.evaluate.profile",
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
                    "kforge_bot.targets.mps.MpsTarget", "kforge_bot.evaluate.worker.Channel")
# What the harness itself calls between two candidate calls while timing: checked after every timed
# candidate sample (the whole snapshot is checked after every correctness call and every phase).
CRITICAL = (
    "time", "builtins", "torch.cuda.Event", "kforge_bot.evaluate.checks", "kforge_bot.evaluate.timing",
    "kforge_bot.evaluate.loading", "kforge_bot.targets.base.HostTimer", "kforge_bot.targets.cuda.CudaEventTimer",
    "kforge_bot.targets.cpu.CpuTarget", "kforge_bot.targets.cuda.CudaTarget", "kforge_bot.targets.base.Target",
    "torch.equal", "torch.save", "torch.no_grad", "torch.isfinite", "torch.cuda.synchronize",
    "torch.cuda.current_stream", "torch.Tensor.fill_", "torch.Tensor.clone", "torch.Tensor.copy_",
    "torch.Tensor.detach", "torch.Tensor.cpu", "torch.Tensor.numel", "torch.Tensor.is_floating_point",
    "torch.Tensor.data_ptr", "torch.Tensor.untyped_storage", "torch.Tensor.layout", "torch.Tensor.device",
    "torch.Tensor.is_meta", "torch.Tensor.nan_to_num", "torch.Tensor.__eq__",
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
    inherited attributes (nearest class wins, as in the MRO)."""
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

    def __init__(self, extra: dict[str, Any] | None = None) -> None:
        self._spaces: dict[str, tuple[Any, dict[str, Any]]] = {}  # name -> (holder, {attr: object})
        self._seals: dict[str, dict[str, tuple[Any, ...]]] = {}  # name -> {attr: seal of the object}
        for name in _WATCHED_MODULES + _WATCHED_CLASSES:
            holder = _holder(name)
            if isinstance(holder, (ModuleType, type)):
                recorded = self._recorded(name, _namespace(holder))
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
        for name, attrs in self._selection(only):
            holder, recorded = self._spaces[name]
            # The harness's own modules leave sys.modules before the candidate is imported (hide_harness).
            now_holder = holder if name.startswith("kforge_bot") else _holder(name)
            if now_holder is not holder and isinstance(holder, ModuleType):
                changes.append(f"{name} (module replaced in sys.modules)")
                continue
            # A few attributes of a class: look each up along the MRO rather than merging every dict.
            namespace = _namespace(holder) if len(attrs) > 64 or not isinstance(holder, type) else None
            for attr in attrs:
                value = namespace.get(attr, _MISSING) if namespace is not None else _lookup(holder, attr)
                original = recorded[attr]
                if value is _MISSING:
                    changes.append(f"{name}.{attr} (deleted)")
                elif value is not original and not _framework_rewrap(value, original):
                    changes.append(f"{name}.{attr}")
                elif value is original and seal(value) != self._seals[name][attr]:
                    changes.append(f"{name}.{attr} (its code, defaults or closure)")
        for label, obj in (extra_now or {}).items():
            if label in self._extra and obj is not self._extra[label]:
                changes.append(label)
            elif label in self._extra and seal(obj) != self._extra_seals[label]:
                changes.append(f"{label} (its code, defaults or closure)")
        return changes

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


def hide_harness() -> None:
    """Take the harness's modules out of sys.modules, so candidate code cannot look them up by name and patch
    the objects the harness runs on (the worker keeps its own references; an `import kforge_bot...` in a
    candidate then loads a fresh, unused copy)."""
    for name in [n for n in sys.modules if n == "kforge_bot" or n.startswith("kforge_bot.")]:
        del sys.modules[name]


# --------------------------------------------------------------------------------- framework state

def _backend_flags() -> list[tuple[str, Any, str]]:
    import torch

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
    import torch

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
    import torch

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


# ------------------------------------------------------------------------------ whose code is calling


def _stdlib_test() -> Any:
    """A predicate: is this code file part of Python's standard library (not site-packages)?"""
    import sysconfig

    paths = sysconfig.get_paths()
    stdlib = os.path.join(paths["stdlib"], "")
    installed = tuple(os.path.join(paths[k], "") for k in ("purelib", "platlib"))

    def is_stdlib(filename: str) -> bool:
        return filename.startswith("<frozen") or (filename.startswith(stdlib) and not filename.startswith(installed))

    return is_stdlib


# ----------------------------------------------------------------------------------------- threads


class ThreadWatch:
    """Python threads started by the candidate's own code, so none may outlive a call.

    On the CPU a thread is what a side stream is on a GPU: a forward that hands its work to a thread and
    returns at once is timed as instant, and its output fills in later. Threads count as the candidate's
    when the nearest caller outside the standard library (which holds Thread and the thread pools) is
    the candidate's source file; threads the framework starts for itself are not its business.
    """

    def __init__(self, candidate_dir_prefix: str) -> None:
        import threading

        self._prefix = candidate_dir_prefix
        self._is_stdlib = _stdlib_test()
        self._threading = threading
        self.started: list[Any] = []

    def install(self) -> None:
        watch = self
        original = self._threading.Thread.start

        def start(thread: Any) -> None:
            if watch._started_by_candidate():
                watch.started.append(thread)
            original(thread)

        start.__wrapped__ = original  # type: ignore[attr-defined]
        self._threading.Thread.start = start  # type: ignore[method-assign]

    def _started_by_candidate(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if not self._is_stdlib(filename):
                return filename.startswith(self._prefix)
            frame = frame.f_back
        return False

    def running(self) -> list[str]:
        """Names of candidate threads still alive."""
        return [t.name for t in self.started if t.is_alive()]


# -------------------------------------------------------------------------------- frames and the gc

# Every way Python hands out a frame or someone else's objects raises one of these audit events (PEP 578);
# f_back and f_locals need a first frame, and that comes from one of them.
_AUDITED_CALLS = {"sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "gc.get_objects",
                  "gc.get_referrers", "gc.get_referents"}
_AUDITED_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
# Standard-library functions that return frames to their caller (others use frames internally only,
# e.g. collections.namedtuple reading its caller's module name, and stay allowed).
_FRAME_GIVERS = {("inspect", "currentframe"), ("inspect", "stack"), ("inspect", "trace"),
                 ("inspect", "getouterframes"), ("inspect", "getinnerframes"), ("traceback", "walk_stack"),
                 ("traceback", "walk_tb")}


class AuditGuard:
    """Blocks the candidate's code from reaching frames or the garbage collector's view of all objects.

    With a frame, a candidate can rewrite the harness's timing lists or read the result channel's nonce;
    with gc.get_objects, find any tensor it likes. The static scan stops the plain spellings; names built
    at run time get past any scan, but not the interpreter's audit hook, which cannot be removed once
    added. An operation is refused (the candidate gets an exception) and remembered (the verdict) when
    the code asking is the candidate's own, directly or through a standard-library function that hands
    frames out. The harness and the framework keep using frames as they like.
    """

    def __init__(self, candidate_dir_prefix: str) -> None:
        import threading

        self._prefix = candidate_dir_prefix
        self._is_stdlib = _stdlib_test()
        self._local = threading.local()  # per thread: another thread cannot slip through while one is inside
        self.refused: list[str] = []

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "object.__getattr__":
            if len(args) < 2 or args[1] not in _AUDITED_ATTRIBUTES:
                return
            what = f".{args[1]}"
        elif event in _AUDITED_CALLS:
            what = f"{event}()"
        else:
            return
        if getattr(self._local, "busy", False):
            return  # our own sys._getframe below
        self._local.busy = True
        try:
            reason = self._refusal(sys._getframe(1), event)
        finally:
            self._local.busy = False
        if reason:
            message = f"{what} {reason}"
            self.refused.append(message)
            raise PermissionError(f"kforge-bot: refused {message}")

    def _refusal(self, frame: Any, event: str) -> str | None:
        first = frame
        givers = []
        while frame is not None and self._is_stdlib(frame.f_code.co_filename):
            module = os.path.splitext(os.path.basename(frame.f_code.co_filename))[0]
            givers.append((module, frame.f_code.co_name))
            frame = frame.f_back
        if frame is None or not frame.f_code.co_filename.startswith(self._prefix):
            return None  # the harness's or the framework's own business
        line = f"(candidate line {frame.f_lineno})"
        if frame is first or event not in ("sys._getframe", "object.__getattr__"):
            return line
        given = next((g for g in givers if g in _FRAME_GIVERS), None)
        return f"through {given[0]}.{given[1]}() {line}" if given else None
