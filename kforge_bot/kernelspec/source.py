"""A kernel file's text and what can be read from it without running it: its syntax tree, its top-level names,
whether it is a KernelBench problem, the language it is written in. Nothing here imports user code."""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from kforge_bot.config import reader
from kforge_bot.errors import KforgeError


def read_source(path: Path, boundary: Path | None = None) -> str:
    """A kernel, reference or inputs file's text, or a one-line KforgeError naming it (outside `boundary`, missing,
    not a regular file, too large, binary): kforge_bot.config.reader's."""
    return reader.read_text(path, boundary)


def parse_python(path: Path, source: str) -> ast.Module:
    """`source` as a module's syntax tree, or a KforgeError naming the file and the line."""
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise KforgeError(f"line {exc.lineno}: Python syntax error: {exc.msg}", path=path,
                          hint="fix the syntax so the file imports") from None


def top_level_names(tree: ast.Module) -> dict[str, str]:
    """Module-level definitions: name -> 'class' | 'function' | 'assign'."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = "function"
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = "assign"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.setdefault((alias.asname or alias.name).split(".")[0], "import")
    return names


@functools.lru_cache(maxsize=16)
def _names_of(source: str) -> Mapping[str, str]:
    """top_level_names of `source`, read-only (shared by every caller), empty where it does not parse. Cached:
    `init` asks about every launcher of a module with hundreds (one parse each made a 257-launcher module take 10 s)."""
    try:
        return MappingProxyType(top_level_names(ast.parse(source)))
    except SyntaxError:
        return MappingProxyType({})


def is_kernelbench_source(source: str) -> bool:
    names = _names_of(source)
    return names.get("Model") == "class" and "get_inputs" in names and "get_init_inputs" in names


def defines(source: str, symbol: str) -> bool:
    return symbol in _names_of(source)


def entry_or_written(source: str, entry: str, written: str) -> str:
    """Which symbol of a source is the kernel where a candidate's name (`entry`: ModelNew, custom_kernel) differs
    from the problem's (`written`: Model, ref_kernel): `written` where the source defines only that (the problem's
    own file), else `entry`, so that a source that does not parse or lacks it is judged by its own error."""
    return written if not defines(source, entry) and defines(source, written) else entry


def kernelbench_class(source: str) -> str:
    """Which class of a KernelBench source is the kernel: ModelNew where it defines one, else Model."""
    return entry_or_written(source, "ModelNew", "Model")


def guess_language(source: str) -> str:
    """The language a Python kernel is written in, read from its source: Triton, CUDA (load_inline), SYCL or torch."""
    if "import triton" in source or "from triton" in source:
        return "triton"
    if "load_inline" in source or "__global__" in source:
        return "cuda"
    if "sycl" in source.lower():
        return "sycl"
    return "torch"
