"""Defences that look at what a candidate is, rather than what it computes.

- `static_findings(source)`: an AST scan for the reward hacks that need a recognisable construct: reading
  other objects through the garbage collector or stack frames, leaving the process early, writing to
  inherited file descriptors, patching the framework or the clock by assignment, importing the harness.
- `FunctionSnapshot`: identities of the framework's, the clock's and the harness's callables, taken before
  the candidate is imported and compared after each phase, so a monkey-patch (of a timer, a comparison,
  the baseline) is a rejection rather than a silent lie.

Neither is the last word: correctness is decided by comparing outputs against a reference computed in
another process, and timing by the device's own clock; these checks turn the known tricks into a clear
verdict and a reason.
"""

from __future__ import annotations

import ast
import os
import sys
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
    "torch.fft", "torch.special", "torch.profiler", "torch.autograd", "time", "math", "builtins", "os", "sys",
    "random", "json", "pickle", "numpy", "kforge_bot.evaluate.worker", "kforge_bot.evaluate.checks",
    "kforge_bot.evaluate.stats", "kforge_bot.evaluate.timing", "kforge_bot.targets.base",
    "kforge_bot.targets.cpu", "kforge_bot.targets.cuda", "kforge_bot.targets.xpu", "kforge_bot.targets.mps",
)
_WATCHED_CLASSES = ("torch.Tensor", "torch.cuda.Event", "torch.cuda.Stream", "torch.nn.Module",
                    "torch.Generator", "torch.cuda.graphs.CUDAGraph")
# Attributes that legitimately change after import (lazy initialisation and counters).
_IGNORED = {"sys.modules", "sys.path", "sys.path_importer_cache", "sys.meta_path", "sys.path_hooks",
            "sys.stdout", "sys.stderr", "sys.stdin", "sys.last_exc", "sys.last_type", "sys.last_value",
            "sys.last_traceback", "sys.exc_info", "os.environ"}


def _trusted_roots() -> tuple[str, ...]:
    roots = []
    for name in ("torch", "triton", "functools"):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            # A package's folder; a single-file stdlib module stands for itself only.
            roots.append(os.path.dirname(path) + os.sep if path.endswith("__init__.py") else path)
    return tuple(roots)


def _from_trusted_package(obj: Any) -> bool:
    """True for the framework re-wrapping its own functions (torch._dynamo wraps torch.manual_seed on import).

    Judged by where the replacement's code lives, not by names it could claim: a candidate's function has
    its code in the candidate's file.
    """
    func = getattr(obj, "__func__", obj)
    code = getattr(func, "__code__", None)
    if code is None:
        wrapped = getattr(func, "__wrapped__", None)
        code = getattr(wrapped, "__code__", None) if wrapped is not None and type(func).__module__ == "functools" else None
    if code is None:
        return False
    return code.co_filename.startswith(_trusted_roots())


def _resolve(dotted: str) -> Any:
    module_name, _, attr = dotted.rpartition(".")
    module = sys.modules.get(module_name)
    return getattr(module, attr, None) if module is not None else None


class FunctionSnapshot:
    """Identity of every callable attribute of the watched modules and classes, at one moment."""

    def __init__(self, extra: dict[str, Any] | None = None) -> None:
        self._ids: dict[str, int] = {}
        for name in _WATCHED_MODULES:
            module = sys.modules.get(name)
            if isinstance(module, ModuleType):
                self._record(name, vars(module))
        for name in _WATCHED_CLASSES:
            cls = _resolve(name)
            if isinstance(cls, type):
                self._record(name, vars(cls))
        for label, obj in (extra or {}).items():
            self._ids[label] = id(obj)
        self._extra = dict(extra or {})

    def _record(self, prefix: str, namespace: dict[str, Any]) -> None:
        for attr, value in list(namespace.items()):
            key = f"{prefix}.{attr}"
            if key in _IGNORED or attr.startswith("__") and attr not in ("__init__", "__call__", "__eq__"):
                continue
            if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                self._ids[key] = id(value)

    def changed(self, extra_now: dict[str, Any] | None = None) -> list[str]:
        """Watched names whose object is no longer the one recorded."""
        changes: list[str] = []
        for key, ident in self._ids.items():
            if key in self._extra:
                continue
            prefix, _, attr = key.rpartition(".")
            holder = sys.modules.get(prefix)
            if holder is None:
                holder = _resolve(prefix)
            if holder is None:
                continue
            namespace = vars(holder) if isinstance(holder, (ModuleType, type)) else {}
            if attr not in namespace:
                changes.append(key + " (deleted)")
            elif id(namespace[attr]) != ident and not _from_trusted_package(namespace[attr]):
                changes.append(key)
        for label, obj in (extra_now or {}).items():
            if label in self._ids and id(obj) != self._ids[label]:
                changes.append(label)
        return changes
