"""The manifest's per-kernel fields that are values, not files: `kwargs`, `tolerance`, `outputs`/`inplace`
(selections by index or name), `backward` and `constraints`. Each parser returns plain data or raises one
KforgeError line naming the manifest and the key."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from kforge_bot.config.yamlcheck import did_you_mean
from kforge_bot.errors import KforgeError

CONSTRAINT_KEYS = ("multiple_of", "min", "max", "fixed")


def kwargs_field(value: Any, where: str, manifest: Path) -> dict[str, Any]:
    """`kwargs:` keyword arguments for the entry: names to plain values (a string "torch.float16" is the dtype)."""
    if value is None:
        return {}
    plain = (str, int, float, bool, type(None))
    if not isinstance(value, dict) or not all(isinstance(k, str) and k.isidentifier() for k in value) or not all(
            isinstance(v, plain) or (isinstance(v, list) and all(isinstance(i, plain) for i in v))
            for v in value.values()):
        raise KforgeError(f"{where}: expected a mapping of keyword names to numbers, strings, booleans or lists",
                          path=manifest, hint='e.g. kwargs: {approximate: tanh, alpha: 0.5, dtype: torch.float16}')
    return dict(value)


def tolerances_field(value: Any, where: str, manifest: Path) -> tuple[dict[str, float] | None, dict[str, float] | None]:
    """`tolerance:` {atol, rtol} for every output, with an optional `backward: {atol, rtol}` for the gradients."""
    def one(part: Any, label: str) -> dict[str, float]:
        if not isinstance(part, dict) or set(part) - {"atol", "rtol"} or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in part.values()):
            raise KforgeError(f"{where}.{label}: expected {{atol: number, rtol: number}} with values >= 0",
                              path=manifest, hint="a backward's own: tolerance: {atol: ..., rtol: ..., backward: "
                                                  "{atol: ..., rtol: ...}}")
        return {k: float(v) for k, v in part.items()}

    if value is None:
        return None, None
    if not isinstance(value, dict):
        one(value, "tolerance")
    forward = {k: v for k, v in value.items() if k != "backward"}
    backward = one(value["backward"], "tolerance.backward") if "backward" in value else None
    return (one(forward, "tolerance") if forward else None), backward


def selection(value: Any, key: str, where: str, manifest: Path, allow_empty: bool) -> tuple[int | str, ...]:
    """An index, a name, or a list of them (`outputs:`, `inplace:`, `backward.inputs:`)."""
    items = value if isinstance(value, list) else [value]
    ok = all((isinstance(v, int) and not isinstance(v, bool) and v >= 0) or (isinstance(v, str) and v.isidentifier())
             for v in items)
    if not ok or (not items and not allow_empty) or len(set(items)) != len(items):
        raise KforgeError(f"{where}.{key}: expected an index (0, 1, ...), a name, or a list of distinct ones, got "
                          f"{value!r}", path=manifest)
    return tuple(items)


_BACKWARD_KEYS = {"inputs", "inplace", "launcher", "args", "returns"}


BACKWARD_ARG_KINDS = ("grad", "input", "output")  # backward.args: grad.N, input.NAME|N, output.N (else a literal)


def entry_parameters(source: str, symbol: str) -> list[str] | None:
    """The entry's parameters in call order, read from its source: a function's, or a class's forward without its
    first (self, or an autograd.Function's ctx); None where the file does not define it (an import)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == symbol:
            return [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        if isinstance(node, ast.ClassDef) and node.name == symbol:
            forward = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
            if forward is not None:
                return [a.arg for a in (*forward.args.posonlyargs, *forward.args.args)][1:]
    return None


def positions(items: tuple[int | str, ...], names: list[str] | None, key: str, where: str,
               manifest: Path) -> tuple[int | str, ...]:
    """Names of the entry's parameters as positions (an oracle of its own may name its parameters otherwise);
    left as names where the entry's parameters cannot be read here (its worker resolves them)."""
    if names is None:
        return items
    found, unknown = name_positions(items, names)
    if unknown:
        raise KforgeError(f"{where}.{key}: the entry has no parameter {unknown[0]!r} (has: {', '.join(names)})",
                          path=manifest)
    return found


def name_positions(items: tuple[int | str, ...], names: list[str]) -> tuple[tuple[int | str, ...], list[str]]:
    """(`items` with each parameter name as its position, the names that are no parameter): the one mapping the
    manifest's reader and the worker (for entries whose parameters only it can read) both apply."""
    unknown = [i for i in items if isinstance(i, str) and i not in names]
    return tuple(names.index(i) if isinstance(i, str) and i in names else i for i in items), unknown


def backward_field(value: Any, where: str, manifest: Path) -> tuple[tuple[int | str, ...], tuple[int | str, ...],
                                                               dict[str, Any]]:
    """(the inputs whose gradients are checked, those of them the backward writes its gradient into, the backward
    launcher: {} for autograd through the entry)."""
    if value is None:
        return (), (), {}
    if not isinstance(value, dict) or "inputs" not in value or set(value) - _BACKWARD_KEYS:
        raise KforgeError(f"{where}.backward: expected {{inputs: [...]}} (autograd through the entry), with "
                          "inplace for gradients written into their inputs, and launcher, args and returns for a "
                          "backward launcher", path=manifest,
                          hint="e.g. backward: {inputs: [x, weight]}, or add launcher: rms_norm_backward, "
                               "args: [grad.0, input.x, input.weight, output.2]")
    inputs = selection(value["inputs"], "backward.inputs", where, manifest, allow_empty=False)
    written = () if value.get("inplace") is None else \
        selection(value["inplace"], "backward.inplace", where, manifest, allow_empty=True)
    if set(value) <= {"inputs", "inplace"}:
        return inputs, written, {}
    launcher, args = value.get("launcher"), value.get("args")
    if not isinstance(launcher, str) or not launcher.isidentifier() or not isinstance(args, list):
        raise KforgeError(f"{where}.backward: a backward launcher needs launcher (a name in the entry's module) and "
                          "args (a list: grad.N, input.NAME, output.N or literals)", path=manifest)
    for arg in args:
        kind, dot, rest = arg.partition(".") if isinstance(arg, str) else ("", "", "")
        if dot and kind in BACKWARD_ARG_KINDS and not (rest.isdigit() or (kind == "input" and rest.isidentifier())):
            raise KforgeError(f"{where}.backward.args: {arg!r} is not grad.N, input.NAME|N or output.N",
                              path=manifest)
    returns = None if value.get("returns") is None else \
        selection(value["returns"], "backward.returns", where, manifest, allow_empty=False)
    return inputs, written, {"launcher": launcher, "args": list(args),
                             "returns": None if returns is None else list(returns)}


def constraints_field(value: Any, shapes: list[dict[str, Any]], where: str, manifest: Path) -> dict[str, dict[str, Any]]:
    """`constraints: {n: {multiple_of: 256, min: 256, max: 65536}, batch: {fixed: true}}`: the domain a kernel is
    honestly meant for, per size (held-out variants keep to it, kforge_bot.evaluate.wire.heldout). Every listed shape set
    must lie in it."""
    if value is None:
        return {}
    key = f"{where}.constraints"
    if not isinstance(value, dict):
        raise KforgeError(f"{key}: expected a mapping of size name to {{multiple_of, min, max, fixed}}", path=manifest)
    sizes = {k for s in shapes for k, v in s.items() if type(v) is int}
    out: dict[str, dict[str, Any]] = {}
    for name, rule in value.items():
        if name not in sizes:
            raise KforgeError(f"{key}.{name}: no shape set has an integer size {name!r}", path=manifest,
                              hint=f"{did_you_mean(str(name), sorted(sizes))}constrain a size the shapes list")
        if not isinstance(rule, dict) or not rule:
            raise KforgeError(f"{key}.{name}: expected a mapping with any of {', '.join(CONSTRAINT_KEYS)}",
                              path=manifest)
        unknown = sorted(set(rule) - set(CONSTRAINT_KEYS))
        if unknown:
            raise KforgeError(f"{key}.{name}: unknown key {unknown[0]!r}", path=manifest,
                              hint=f"{did_you_mean(str(unknown[0]), list(CONSTRAINT_KEYS))}allowed keys: "
                                   f"{', '.join(CONSTRAINT_KEYS)}")
        for bound in ("multiple_of", "min", "max"):
            if bound in rule and (type(rule[bound]) is not int or rule[bound] < 1):
                raise KforgeError(f"{key}.{name}.{bound}: expected a positive integer, got {rule[bound]!r}",
                                  path=manifest)
        if "fixed" in rule and not isinstance(rule["fixed"], bool):
            raise KforgeError(f"{key}.{name}.fixed: expected true or false, got {rule['fixed']!r}", path=manifest)
        if rule.get("min", 1) > rule.get("max", rule.get("min", 1)):
            raise KforgeError(f"{key}.{name}: min {rule['min']} is above max {rule['max']}", path=manifest)
        for i, shape in enumerate(shapes):
            size = shape.get(name)
            if type(size) is not int:
                continue
            broken = ("multiple_of" in rule and size % rule["multiple_of"]) or size < rule.get("min", size) \
                or size > rule.get("max", size)
            if broken:
                raise KforgeError(f"{where}.shapes[{i}].{name}: {size} breaks its constraint {rule}", path=manifest,
                                  hint="a listed shape must lie in the domain the constraint declares")
        out[str(name)] = dict(rule)
    return out
