"""Code a library runs when it is imported that asks for a GPU (a device's properties, the active Triton driver),
read, never run: such a library raises at import on a machine without one, so `list --import` and `check` of it need a
GPU runner, and `init` says so before anyone tries."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from kforge_bot.init.scan.modules import Library

# torch.cuda calls that raise where there is no CUDA device (is_available and device_count answer instead).
RAISING_CUDA_CALLS = frozenset({"get_device_properties", "get_device_name", "get_device_capability",
                                "current_device", "set_device", "synchronize", "mem_get_info", "init",
                                "current_stream", "get_arch_list_for_device"})


@dataclass(frozen=True)
class DeviceQuery:
    rel: str  # the module's repository-relative path
    line: int
    call: str  # what it calls, as written: torch.cuda.get_device_properties, triton.runtime.driver.active...

    def __str__(self) -> str:
        return f"{self.rel}:{self.line} ({self.call})"


def import_time_queries(library: Library) -> list[DeviceQuery]:
    """Every device query in code that runs when its module is imported (module level, class bodies and decorators,
    never a function's body unless import-time code calls that function: attorch's `get_n_stages()` in an autotune
    config), in the library's modules. Functions are matched by name across the library."""
    asking = _asking_functions(library)
    found: dict[tuple[str, int], DeviceQuery] = {}  # one per line (a call's chain holds it more than once)
    for module in library.modules():
        for node in _import_time_nodes(module.tree):
            query = _query(node, asking)
            if query is not None:
                found.setdefault((module.rel, node.lineno), DeviceQuery(module.rel, node.lineno, query))
    return sorted(found.values(), key=lambda q: (q.rel, q.line))


def _query(node: ast.AST, asking: dict[str, str]) -> str | None:
    """What `node` asks the device for: a query itself, or a call of a library function that makes one."""
    if isinstance(node, ast.Attribute):
        text = _dotted(node)
        return text if text and _asks_for_device(text) else None
    if isinstance(node, ast.Call):
        name = _callee(node)
        if name in asking:
            return f"{name}() -> {asking[name]}"
    return None


def _callee(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _asking_functions(library: Library) -> dict[str, str]:
    """Top-level functions whose bodies ask for the device, directly or through another such function: name -> the
    query. Each body is walked once; the calls between them are followed to a fixed point."""
    asking: dict[str, str] = {}
    calls: dict[str, set[str]] = {}
    for module in library.modules():
        for name, node in module.defs.items():
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            called = calls.setdefault(name, set())
            for inner in ast.walk(node):
                query = _query(inner, {})
                if query is not None:
                    asking.setdefault(name, query)
                elif isinstance(inner, ast.Call):
                    called.add(_callee(inner) or "")
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            if name not in asking:
                via = next((c for c in called if c in asking), None)
                if via is not None:
                    asking[name] = asking[via]
                    changed = True
    return asking


def _import_time_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            pending.extend(node.decorator_list if not isinstance(node, ast.Lambda) else [])
            continue  # runs when called, not when imported (its decorators run now)
        yield node
        pending.extend(ast.iter_child_nodes(node))


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call):  # driver.active.get_current_target().arch: the chain before the call
        return _dotted(node.func)
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _asks_for_device(text: str) -> bool:
    parts = text.split(".")
    if "driver" in parts and parts[parts.index("driver") + 1:parts.index("driver") + 2] == ["active"]:
        return parts[-1] == "active"
    return len(parts) >= 3 and parts[-3:-1] == ["torch", "cuda"] and parts[-1] in RAISING_CUDA_CALLS
