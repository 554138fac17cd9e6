"""A library's Triton kernels and the public launchers that reach them, read from the call graph.

A kernel is a top-level function decorated with `triton.jit`, `triton.autotune` or `triton.heuristics` (or
those names imported from triton), or a name bound to such a call (`kernel = triton.jit(_kernel)`). Every
top-level function and class is a node; it uses what its body names (resolved across modules by
kforge_bot.init.scan.modules). A launcher of a kernel is the nearest public function (or nn.Module class) that
reaches it through private functions, `autograd.Function` classes and other classes: a helper that reaches
no kernel (`get_num_warps`, `calculate_settings`) is never one, and nothing in a test or benchmark file is.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from dataclasses import dataclass, field

from kforge_bot.init.scan.modules import Library, Module, Ref, top_statements

_TRITON_WRAPPERS = {"jit", "autotune", "heuristics"}
_MAX_DEPTH = 6  # call-graph hops from a kernel to its launcher
_BACKWARD = re.compile(r"(?:^|_)(?:backward|bwd|grad)(?:_|$)", re.I)

Node = tuple[str, str]  # (module rel, top-level symbol)


@dataclass
class FoundKernel:
    module: Module
    name: str
    autotuned: bool
    wrapped: bool  # `name = triton.jit(f)`, not a decorator
    wraps: str | None = None  # that `f`, when it is a name

    def sources(self) -> list[str]:
        """The kernel's source text: its definition, or the assignment and the function it wraps."""
        names = [self.name] + ([self.wraps] if self.wraps else [])
        return [ast.get_source_segment(self.module.source, self.module.defs[n]) or ""
                for n in names if n in self.module.defs]


@dataclass
class Launcher:
    module: Module
    symbol: str
    kind: str  # function | module (an nn.Module class)
    kernels: list[FoundKernel] = field(default_factory=list)

    @property
    def is_backward(self) -> bool:
        return bool(_BACKWARD.search(self.symbol))


def is_test_file(rel: str) -> bool:
    parts = rel.split("/")
    name = parts[-1]
    return (any(p in ("tests", "test", "testing") for p in parts[:-1]) or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py")


def is_benchmark_file(rel: str) -> bool:
    return any(p.startswith(("benchmark", "bench")) for p in rel.split("/")[:-1])


def _triton_wrapper(module: Module, node: ast.expr) -> str | None:
    """'jit' | 'autotune' | 'heuristics' when `node` (a decorator, or a call's function) is triton's."""
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute) and target.attr in _TRITON_WRAPPERS:
        root = target.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            imported = module.imports.get(root.id, (root.id, None))[0]
            if imported.split(".")[0] == "triton":
                return target.attr
    if isinstance(target, ast.Name) and target.id in module.imports:
        source, symbol = module.imports[target.id]
        if source.split(".")[0] == "triton" and symbol in _TRITON_WRAPPERS:
            return symbol
    return None


def find_kernels(module: Module) -> dict[str, FoundKernel]:
    """The Triton kernels a module defines at its top level."""
    found: dict[str, FoundKernel] = {}
    for node in top_statements(module.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kinds = {_triton_wrapper(module, d) for d in node.decorator_list} - {None}
            if kinds:
                found[node.name] = FoundKernel(module, node.name, "autotune" in kinds, wrapped=False)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            calls = [c for c in ast.walk(node.value) if isinstance(c, ast.Call) and _triton_wrapper(module, c)]
            kinds = {_triton_wrapper(module, c) for c in calls}
            wrapped = next((a.id for c in calls for a in c.args if isinstance(a, ast.Name)), None)
            if kinds:
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in found:
                        found[target.id] = FoundKernel(module, target.id, "autotune" in kinds, wrapped=True, wraps=wrapped)
    return found


def _uses(library: Library, module: Module, node: ast.stmt) -> set[Node]:
    """The repository's top-level symbols a definition names in its body (and decorators' arguments)."""
    used: set[Node] = set()
    for sub in ast.walk(node):
        ref: Ref | None = None
        if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load):
            ref = library.resolve_expr(module, sub)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            ref = library.resolve(module, sub.id)
        if ref is not None and ref.symbol is not None:
            used.add((ref.module.rel, ref.symbol))
    return used


def _class_kind(node: ast.ClassDef) -> str:
    bases = " ".join(ast.unparse(b) for b in node.bases)
    if re.search(r"\bFunction\b", bases):
        return "autograd"
    if re.search(r"\bModule\b", bases):
        return "module"
    return "class"


@dataclass
class CallGraph:
    """Kernels, definitions and who uses whom, for every module that is not skipped."""

    library: Library
    kernels: dict[Node, FoundKernel] = field(default_factory=dict)
    kinds: dict[Node, str] = field(default_factory=dict)  # function | module | autograd | class | kernel
    users: dict[Node, set[Node]] = field(default_factory=dict)

    @classmethod
    def build(cls, library: Library) -> CallGraph:
        graph = cls(library)
        for module in library.modules():
            for name, kernel in find_kernels(module).items():
                graph.kernels[(module.rel, name)] = kernel
                graph.kinds[(module.rel, name)] = "kernel"
        for module in library.modules():
            for name, node in module.defs.items():
                key = (module.rel, name)
                if key in graph.kernels:
                    pass  # a kernel's uses are the device functions it calls
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    graph.kinds[key] = "function"
                elif isinstance(node, ast.ClassDef):
                    graph.kinds[key] = _class_kind(node)
                else:
                    continue
                for used in _uses(library, module, node):
                    if used != key:
                        graph.users.setdefault(used, set()).add(key)
        return graph

    def is_entry(self, node: Node) -> bool:
        rel, symbol = node
        if symbol.startswith("_") or symbol == "main" or symbol.startswith(("test", "bench")):
            return False
        if is_test_file(rel) or is_benchmark_file(rel):
            return False
        return self.kinds.get(node) in ("function", "module", "autograd")

    def launched(self, kernel: Node) -> bool:
        """Whether anything but another kernel names it (a kernel only other kernels call is a device function)."""
        return any(self.kinds.get(u) != "kernel" for u in self.users.get(kernel, ()))

    def launchers_of(self, kernel: Node) -> tuple[list[Node], list[Node]]:
        """The nearest public launchers of a kernel, and the private code that reaches it when no public
        function does (for a note)."""
        found: list[Node] = []
        private: list[Node] = []
        seen = {kernel}
        queue = deque((u, 1) for u in sorted(self.users.get(kernel, ())) if self.kinds.get(u) != "kernel")
        while queue:
            node, depth = queue.popleft()
            if node in seen:
                continue
            seen.add(node)
            if self.is_entry(node):
                found.append(node)
                continue
            if is_test_file(node[0]) or is_benchmark_file(node[0]):
                continue
            private.append(node)
            if depth < _MAX_DEPTH:
                queue.extend((u, depth + 1) for u in sorted(self.users.get(node, ())) if self.kinds.get(u) != "kernel")
        return found, private

    def launchers(self) -> tuple[list[Launcher], dict[Node, list[Node]]]:
        """Every public launcher with the kernels it reaches, in file order; and each launched kernel that no
        public launcher reaches, with the private code that does."""
        by_node: dict[Node, Launcher] = {}
        orphans: dict[Node, list[Node]] = {}
        for key, kernel in sorted(self.kernels.items()):
            if not self.launched(key):
                continue
            found, private = self.launchers_of(key)
            if not found:
                orphans[key] = private
            for node in found:
                launcher = by_node.get(node)
                if launcher is None:
                    module = self.library.by_rel[node[0]]
                    launcher = by_node[node] = Launcher(module, node[1], self.kinds[node])
                launcher.kernels.append(kernel)
        ordered = sorted(by_node.values(), key=lambda la: (la.module.rel, la.module.defs[la.symbol].lineno))
        return ordered, orphans
