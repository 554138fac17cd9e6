"""A repository's Python modules, parsed and never imported: each one's dotted name, top-level definitions and
imports, and where a name used in one module is defined (following `from x import y`, relative imports,
`import a.b as c`, re-exports through `__init__.py` and `from x import *`)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kforge_bot.config import reader
from kforge_bot.errors import KforgeError

_MAX_HOPS = 8  # re-export chains longer than this are not followed (and cycles end)


@dataclass
class Module:
    """One parsed file."""

    rel: str  # repository-relative path
    name: str  # dotted module name (a leading `src.` dropped; a package is its folder)
    source: str
    tree: ast.Module
    is_package: bool
    defs: dict[str, ast.stmt] = field(default_factory=dict)  # top-level def, class or assignment by name
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # local -> (module, symbol|None)
    star_imports: list[str] = field(default_factory=list)  # modules imported with `*`


@dataclass(frozen=True)
class Ref:
    """A module (symbol None) or a top-level symbol of a module."""

    module: Module
    symbol: str | None

    @property
    def key(self) -> tuple[str, str | None]:
        return self.module.rel, self.symbol


def dotted_name(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if len(parts) > 1 and parts[0] == "src":
        parts = parts[1:]
    return ".".join(parts)


def top_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module's top-level statements, with those inside top-level `if`/`try` blocks (an optional import of
    triton, a kernel defined only where it is available)."""
    out: list[ast.stmt] = []
    pending = list(tree.body)
    while pending:
        node = pending.pop(0)
        out.append(node)
        if isinstance(node, ast.If):
            pending[:0] = [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            pending[:0] = [*node.body, *(s for h in node.handlers for s in h.body), *node.orelse, *node.finalbody]
    return out


def parse_module(rel: str, source: str) -> Module | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    module = Module(rel, dotted_name(rel), source, tree, rel.endswith("__init__.py"))
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for node in top_statements(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module.defs.setdefault(node.name, node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    module.defs.setdefault(target.id, node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    module.imports[alias.asname] = (alias.name, None)
                else:  # `import a.b` binds `a`
                    top = alias.name.split(".")[0]
                    module.imports[top] = (top, None)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(package, node.module, node.level)
            if base is None:
                continue
            for alias in node.names:
                if alias.name == "*":
                    module.star_imports.append(base)
                else:
                    module.imports[alias.asname or alias.name] = (base, alias.name)
    return module


def _absolute(package: str, module: str | None, level: int) -> str | None:
    if level == 0:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return None
    base = parts[:len(parts) - (level - 1)]
    if module:
        base.append(module)
    return ".".join(base) if base else None


class Library:
    """Every parsed module of a repository, and name resolution across them."""

    def __init__(self, modules: Iterable[Module]):
        self.by_rel: dict[str, Module] = {}
        self.by_name: dict[str, list[Module]] = {}
        for module in modules:
            self.by_rel[module.rel] = module
            self.by_name.setdefault(module.name, []).append(module)
        self._suffix_cache: dict[str, Module | None] = {}

    @classmethod
    def read(cls, root: Path, files: Iterable[Path]) -> Library:
        modules = []
        for path in files:
            try:
                source = reader.read_text(path, root)
            except KforgeError:
                continue  # outside the library, not a regular file, too large or not text
            module = parse_module(path.relative_to(root).as_posix(), source)
            if module is not None:
                modules.append(module)
        return cls(modules)

    def modules(self) -> list[Module]:
        return [self.by_rel[rel] for rel in sorted(self.by_rel)]

    def find_module(self, name: str) -> Module | None:
        """The module of a dotted name: exact, else the one module whose name ends with it (an import of
        `pkg.ops` from a repository whose files sit under another folder)."""
        exact = self.by_name.get(name)
        if exact:
            return exact[0]
        if name not in self._suffix_cache:
            hits = [ms[0] for full, ms in self.by_name.items() if full.endswith("." + name)]
            self._suffix_cache[name] = hits[0] if len(hits) == 1 else None
        return self._suffix_cache[name]

    def resolve(self, module: Module, name: str, hops: int = 0) -> Ref | None:
        """Where `name`, as `module` sees it at the top level, is defined in this repository (None: outside it,
        or unknown)."""
        if hops > _MAX_HOPS:
            return None
        if name in module.defs:
            return Ref(module, name)
        if name in module.imports:
            target, symbol = module.imports[name]
            if symbol is None:
                found = self.find_module(target)
                return Ref(found, None) if found is not None else None
            source = self.find_module(target)
            if source is not None:
                ref = self.resolve(source, symbol, hops + 1)
                if ref is not None:
                    return ref
            submodule = self.find_module(f"{target}.{symbol}")
            return Ref(submodule, None) if submodule is not None else None
        for star in module.star_imports:
            source = self.find_module(star)
            if source is not None and source is not module:
                ref = self.resolve(source, name, hops + 1)
                if ref is not None:
                    return ref
        return None

    def resolve_expr(self, module: Module, node: ast.expr) -> Ref | None:
        """A name or dotted attribute chain (`ops.rms_norm.rms_norm_forward`) to what it names."""
        if isinstance(node, ast.Name):
            return self.resolve(module, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve_expr(module, node.value)
            if base is None or base.symbol is not None:
                return None
            ref = self.resolve(base.module, node.attr)
            if ref is not None:
                return ref
            submodule = self.find_module(f"{base.module.name}.{node.attr}")
            return Ref(submodule, None) if submodule is not None else None
        return None
