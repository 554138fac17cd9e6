"""Where a kernel source holds integer literals worth tuning: the tuner's scanner (kforge_bot.tuner.tunables
turns these sites into named parameters).

Python is read through its syntax tree (module constants, single-assignment locals, launch and `triton.Config`
keywords, sizes returned by a launch helper's call); C, C++, CUDA and SYCL (a file, or a string literal in a
Python file) through patterns (`#define`, `constexpr`, `<<<grid, block>>>` launches). `kforge: tune NAME in
[...]` markers make any name tunable.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kforge_bot.errors import KforgeError

_MARKER = re.compile(r"(?:#|//)\s*kforge:\s*tune\s+(?P<name>[A-Za-z_][\w.@\[\]]*)\s+in\s+\[(?P<values>[^\]]*)\]")


def kind_of(name: str, *, gpu: bool) -> str | None:
    """The kind of a parameter from its name, or None when the name does not look tunable."""
    n = name.upper()
    parts = set(p for p in re.split(r"_+", n) if p)
    if n in ("NUM_WARPS", "WARPS", "NWARPS") or "WARPS" in parts:
        return "warps"
    if "STAGES" in parts or n in ("NUM_STAGES", "NSTAGES"):
        return "stages"
    if n in ("THREADS_PER_BLOCK", "BLOCK_THREADS", "BLOCK_DIM", "BLOCKDIM", "WORK_GROUP_SIZE", "WG_SIZE") or {"THREADS", "NTHREADS", "WORKERS"} & parts or n == "THREADS":
        if n in ("THREADS_PER_BLOCK", "BLOCK_THREADS", "BLOCK_DIM", "BLOCKDIM", "WORK_GROUP_SIZE", "WG_SIZE"):
            return "gpu_threads"
        return "gpu_threads" if gpu else "threads"
    if n in ("BM", "BN", "BK") or re.fullmatch(r"(?:BLOCK|TILE)(?:_SIZE)?_?[MNK]", n):
        return "tile"  # one side of a 2-D (matmul) tile: shared memory and registers cap it low
    if {"BLOCK", "TILE", "CHUNK", "BLOCKSIZE", "TILESIZE"} & parts or n.startswith(("BLOCK", "TILE")):
        return "block"
    if {"GROUP", "SPLIT", "UNROLL", "VEC", "VECTOR", "PER"} & parts:
        return "small"  # GROUP_M, SPLIT_K, UNROLL, VEC, ITEMS_PER_THREAD, ROWS_PER_PROGRAM
    return None


UNPINNED = 0  # a pin site's value as written: the helper call decides it at run time


@dataclass(frozen=True)
class Pin:
    """Where a size returned by a helper's call (`BLOCK_SIZE, num_warps = calculate_settings(n)`) is pinned:
    a statement `; num_warps = 8` right after the call's assignment, on its line, so that no line moves (names
    like `num_warps@42` stay stable under apply) and the helper still runs for the sizes left to it.
    While unpinned, start == end is where the pin goes; once pinned, start..end is the pin with its `;`."""

    target: str
    anchor: int  # the target name in the assignment: the site's identity, pinned or not
    start: int
    end: int

    def statement(self, value: int) -> str:
        return f"; {self.target} = {value}"


@dataclass
class Site:
    base: str
    kind: str | None
    current: int
    origin: str
    line: int
    spans: list[tuple[int, int, int]]
    group: str | None = None  # sites that move together as one configuration: one autotune list, one helper
    pin: Pin | None = None  # a helper call's size: rewritten by a pin statement, not by its (absent) literal

    @property
    def anchor(self) -> int:
        return self.pin.anchor if self.pin is not None else self.spans[0][0]


class SourceText:
    """Maps ast (line, UTF-8 byte column) positions to character offsets."""

    def __init__(self, source: str):
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col_bytes: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined,arg-type]

    def line_of(self, offset: int) -> int:
        return self.source.count("\n", 0, offset) + 1


def _int_value(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _is_upper(name: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_]*", name))


def python_sites(tree: ast.Module, text: SourceText, gpu: bool, forced: set[str]
                 ) -> tuple[list[Site], list[tuple[int, int]]]:
    """The sites of a Python source, and the spans of its string literals (outermost only: C may hide there).
    The order of the readings matters: the first to reach a literal names it."""
    scan = _PythonScan(text, gpu, forced)
    # First, so that a pin's literal is read as its call's size (no constant or local of the same name).
    local_helpers = _helper_sites(tree, lambda *_: None, scan.looks_tunable, gpu)
    scan.sites += _call_sites(tree, text, gpu, forced, local_helpers, scan.taken)
    scan.module_constants(tree)
    scan.function_locals(tree)
    _helper_sites(tree, scan.add, scan.looks_tunable, gpu)
    _config_space_sites(tree, scan.add, gpu)
    scan.calls(tree)
    strings = [text.span(sub) for sub in ast.walk(tree)
               if isinstance(sub, ast.JoinedStr) or (isinstance(sub, ast.Constant) and isinstance(sub.value, str))]
    return scan.sites, _outermost(strings)


class _PythonScan:
    """The sites found so far in one Python source, and the literals they took: one literal, one site."""

    def __init__(self, text: SourceText, gpu: bool, forced: set[str]):
        self.text, self.gpu, self.forced = text, gpu, forced
        self.sites: list[Site] = []
        self.taken: set[int] = set()

    def add(self, base: str, kind: str | None, node: ast.AST | None, origin: str, group: str | None = None) -> None:
        value = _int_value(node)
        if value is None or node is None:
            return
        start, end = self.text.span(node)
        if start in self.taken:
            return  # one literal, one site: the first reading of it (a local before a helper's size) names it
        self.taken.add(start)
        line: int = node.lineno  # type: ignore[attr-defined]
        self.sites.append(Site(base, kind, value, origin, line, [(start, end, 0)], group))

    def looks_tunable(self, name: str) -> bool:
        return bool(_is_upper(name) and kind_of(name, gpu=self.gpu)) or name in self.forced

    def module_constants(self, tree: ast.Module) -> None:
        for node in tree.body:
            target, value = _simple_assign(node)
            if target and self.looks_tunable(target):
                self.add(target, kind_of(target, gpu=self.gpu), value, "constant")

    def function_locals(self, tree: ast.Module) -> None:
        """Assignments inside functions, each name assigned exactly once there."""
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            counts: dict[str, int] = {}
            literal: dict[str, ast.AST] = {}
            for inner in ast.walk(fn):
                for name in _assigned_names(inner):
                    counts[name] = counts.get(name, 0) + 1
                target, value = _simple_assign(inner)
                if target and value is not None and _int_value(value) is not None:
                    literal[target] = value
            for name, value in literal.items():
                if counts.get(name) != 1:
                    continue
                if name in ("num_warps", "num_stages"):
                    self.add(name, "warps" if name == "num_warps" else "stages", value, "local")
                elif self.looks_tunable(name):
                    self.add(name, kind_of(name, gpu=self.gpu), value, "local")

    def calls(self, tree: ast.Module) -> None:
        """Autotune configs, launch keywords, num_warps / num_stages anywhere; in source order."""
        groups = _config_groups(tree)
        config_index = 0
        calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            if _is_config(call):
                self._config(call, f"autotune[{config_index}].", groups.get(id(call)))
                config_index += 1
                continue
            is_launch = isinstance(call.func, ast.Subscript)
            for kw in call.keywords:
                if kw.arg in ("num_warps", "num_stages"):
                    self.add(kw.arg, "warps" if kw.arg == "num_warps" else "stages", kw.value, "keyword")
                elif kw.arg and (is_launch or kw.arg in self.forced) and self.looks_tunable(kw.arg):
                    self.add(kw.arg, kind_of(kw.arg, gpu=self.gpu), kw.value, "keyword")

    def _config(self, call: ast.Call, prefix: str, group: str | None) -> None:
        """One `triton.Config({...}, num_warps=.., num_stages=..)`: every int of its dict, and its warps and stages."""
        if call.args and isinstance(call.args[0], ast.Dict):
            for key, value in zip(call.args[0].keys, call.args[0].values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    self.add(prefix + key.value, kind_of(key.value, gpu=self.gpu) or "int", value, "autotune", group)
        for kw in call.keywords:
            if kw.arg in ("num_warps", "num_stages"):
                self.add(prefix + kw.arg, "warps" if kw.arg == "num_warps" else "stages", kw.value, "autotune", group)


def _config_groups(tree: ast.Module) -> dict[int, str]:
    """The autotune list (`configs@LINE`) of each `Config` call in one, by the call's id: its elements move as one."""
    groups = {id(e): f"configs@{node.lineno}" for node in ast.walk(tree) if isinstance(node, (ast.List, ast.Tuple))
              for e in node.elts if isinstance(e, ast.Call) and _is_config(e)}
    groups.update({id(node.elt): f"configs@{node.lineno}" for node in ast.walk(tree)
                   if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and isinstance(node.elt, ast.Call)})
    return groups


def _is_config(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "Config") or (isinstance(func, ast.Name) and func.id == "Config")


def _helper_sites(tree: ast.Module, add, looks_tunable, gpu: bool) -> set[str]:  # type: ignore[no-untyped-def]
    """A launch helper's returned sizes (`def calculate_settings(n): ... num_warps = 8 ... return BLOCK_SIZE,
    num_warps`): every integer literal the helper assigns to a name it returns, branch by branch. Returns the
    names of the helpers that gave literals (their callers' sizes are tuned here, not pinned at the call)."""
    tuned: set[str] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        returned = {n.id for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None
                    for n in (r.value.elts if isinstance(r.value, ast.Tuple) else [r.value]) if isinstance(n, ast.Name)}
        sizes = {n for n in returned if n in ("num_warps", "num_stages") or looks_tunable(n)}
        for node in ast.walk(fn):
            target, value = _simple_assign(node)
            if target not in sizes:
                continue
            kind = "warps" if target == "num_warps" else "stages" if target == "num_stages" else kind_of(target, gpu=gpu)
            values = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            for literal in values:
                if _int_value(literal) is not None:
                    tuned.add(fn.name)
                add(f"{fn.name}.{target}", kind, literal, "helper", f"{fn.name}()")
    return tuned


def _pin_kind(name: str, gpu: bool, forced: set[str]) -> str | None:
    """The kind of a size a helper's call returns, when pinning it is safe. Warps and stages only change how
    a program runs; a matmul tile side is free (the kernel loops over the rest). Any other block (Liger's
    `BLOCK_SIZE` from `calculate_settings`) may have to cover a whole row, so a smaller pin would compute a
    wrong result: it is pinned only when a `kforge: tune` marker asks for it."""
    if name in ("num_warps", "num_stages"):
        return "warps" if name == "num_warps" else "stages"
    kind = kind_of(name, gpu=gpu) if _is_upper(name) else None
    if kind in ("warps", "stages", "tile"):
        return kind
    return (kind or "int") if name in forced else None


def _call_sites(tree: ast.Module, text: SourceText, gpu: bool, forced: set[str], local_helpers: set[str],
                taken: set[int]) -> list[Site]:
    """Sizes a call returns (`BLOCK_SIZE, num_warps = calculate_settings(n)`, the helper imported): each is
    pinned by a statement after the assignment (see Pin), read back here as the site's value; with no pin the
    value is UNPINNED. Calls of a helper defined in this file are left to `_helper_sites`."""
    sites: list[Site] = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            for i, stmt in enumerate(body):
                if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
                    continue
                func = stmt.value.func
                callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if callee is None or callee in local_helpers:
                    continue
                target = stmt.targets[0]
                names = {e.id: e for e in (target.elts if isinstance(target, ast.Tuple) else [target])
                         if isinstance(e, ast.Name) and _pin_kind(e.id, gpu, forced)}
                if not names:
                    continue
                # Pins already written: `; NAME = <int>` statements following on the assignment's last line.
                end = text.offset(stmt.end_lineno, stmt.end_col_offset)  # type: ignore[arg-type]
                pins: dict[str, tuple[int, int, ast.Constant]] = {}
                for after in body[i + 1:]:
                    name, value = _simple_assign(after)
                    if after.lineno != stmt.end_lineno or name not in names or name in pins or _int_value(value) is None:
                        break
                    after_end = text.offset(after.end_lineno, after.end_col_offset)  # type: ignore[arg-type]
                    pins[name] = (end, after_end, value)  # type: ignore[assignment]
                    end = after_end
                for name, node_ in names.items():
                    anchor = text.span(node_)[0]
                    if name in pins:
                        start, stop, literal = pins[name]
                        taken.add(text.span(literal)[0])  # the pin's literal is this site, no constant or local
                        pin, current = Pin(name, anchor, start, stop), int(literal.value)
                    else:
                        pin, current = Pin(name, anchor, end, end), UNPINNED
                    sites.append(Site(name, _pin_kind(name, gpu, forced), current, "call", stmt.lineno, [], None, pin))
    return sites


def _config_space_sites(tree: ast.Module, add, gpu: bool) -> None:  # type: ignore[no-untyped-def]
    """An autotune space written as a comprehension (`[triton.Config({"BLOCK": b}, num_warps=w) for b in [64,
    128] for w in [4, 8]]`): each integer in the lists it iterates, with the kind of the key it fills."""
    for comp in ast.walk(tree):
        if not (isinstance(comp, (ast.ListComp, ast.GeneratorExp)) and isinstance(comp.elt, ast.Call)
                and _is_config(comp.elt)):
            continue
        config = comp.elt
        fills: dict[str, str] = {}
        if config.args and isinstance(config.args[0], ast.Dict):
            for key, value in zip(config.args[0].keys, config.args[0].values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Name):
                    fills[value.id] = kind_of(key.value, gpu=gpu) or "int"
        for kw in config.keywords:
            if kw.arg in ("num_warps", "num_stages") and isinstance(kw.value, ast.Name):
                fills[kw.value.id] = "warps" if kw.arg == "num_warps" else "stages"
        for generator in comp.generators:
            if isinstance(generator.target, ast.Name) and generator.target.id in fills \
                    and isinstance(generator.iter, (ast.List, ast.Tuple)):
                name = generator.target.id
                for i, element in enumerate(generator.iter.elts):
                    add(f"autotune.{name}[{i}]", fills[name], element, "autotune", f"configs@{comp.lineno}")


def _outermost(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    spans = sorted(spans)
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if out and s < out[-1][1]:
            continue  # a piece of an f-string already covered
        out.append((s, e))
    return out


def _simple_assign(node: ast.AST) -> tuple[str | None, ast.AST | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id, node.value
    return None, None


def _assigned_names(node: ast.AST) -> list[str]:
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, ast.NamedExpr):
        targets = [node.target]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+\(?[ \t]*(?P<value>\d+)[uUlL]*[ \t]*\)?[ \t]*(?://.*|/\*.*)?$", re.M)
_CONSTEXPR = re.compile(
    r"\b(?:(?:static|inline|constexpr|const|__device__|__constant__)\s+)*(?:constexpr|const)\s+"
    r"(?:(?:static|unsigned|signed|long|short)\s+)*(?:int|long|size_t|int32_t|int64_t|uint32_t|uint64_t|unsigned|short|auto|index_t)?\s*"
    r"(?P<name>[A-Za-z_]\w*)\s*(?:=\s*(?P<value>\d+)|\{\s*(?P<braced>\d+)\s*\})[uUlL]*\s*;"
)
_NUMBER = r"(?<![\w.])(?P<n>\d+)(?![\w.])"
_LOOKBACK_LINES = 5  # a launch whose block literal also appears this close above is left alone


def c_sites(source: str, regions: Sequence[tuple[int, int]], text: SourceText, gpu: bool, forced: set[str]) -> list[Site]:
    sites: list[Site] = []
    for lo, hi in regions:
        chunk = source[lo:hi]
        launch_names = set(re.findall(r"<<<[^,>]+,\s*([A-Za-z_]\w*)\s*[,>]", chunk))
        launch_names |= set(re.findall(r"\bdim3\s+\w+\s*\(\s*([A-Za-z_]\w*)\s*\)", chunk))
        for m in _DEFINE.finditer(chunk):
            _c_named(sites, m, "value", "define", lo, text, gpu, forced, launch_names)
        for m in _CONSTEXPR.finditer(chunk):
            _c_named(sites, m, "value" if m.group("value") else "braced", "constexpr", lo, text, gpu, forced, launch_names)
        sites += _launch_sites(chunk, lo, text)
    return sites


def _c_named(sites: list[Site], m: re.Match[str], group: str, origin: str, base: int, text: SourceText, gpu: bool, forced: set[str], launch_names: set[str]) -> None:
    name = m.group("name")
    kind = "gpu_threads" if name in launch_names and gpu else kind_of(name, gpu=gpu) if _is_upper(name) else None
    if kind is None and name not in forced:
        return
    start, end = base + m.start(group), base + m.end(group)
    sites.append(Site(name, kind, int(m.group(group)), origin, text.line_of(start), [(start, end, 0)]))


def _launch_sites(chunk: str, base: int, text: SourceText) -> list[Site]:
    """`<<<grid, 256[, smem[, stream]]>>>`: the block literal, plus the same number (and number - 1,
    as in `(n + 255) / 256`) inside the grid expression, which must move with it. When the number is
    not in the grid expression but appears in the lines just above (`blocks = (n + 255) / 256;`), the
    launch is coupled to code this rewrite cannot see safely, and it is not tuned."""
    sites: list[Site] = []
    for m in re.finditer(r"<<<(?P<args>.*?)>>>", chunk, re.S):
        args = _split_top(m.group("args"))
        if len(args) < 2:
            continue
        (g0, g1), (b0, b1) = args[0], args[1]
        block_text = m.group("args")[b0:b1]
        lit = re.fullmatch(r"\s*(\d+)[uU]?\s*", block_text)
        if not lit:
            continue
        value = int(lit.group(1))
        args_at = base + m.start("args")
        start = args_at + b0 + lit.start(1)
        spans = [(start, start + len(lit.group(1)), 0)]
        grid = m.group("args")[g0:g1]
        nums = [(n.start("n"), n.end("n"), int(n.group("n"))) for n in re.finditer(_NUMBER, grid)]
        coupled = any(v == value for _, _, v in nums)
        before = "\n".join(chunk[: m.start()].splitlines()[-_LOOKBACK_LINES:])
        if not coupled and re.search(rf"(?<![\w.]){value}(?![\w.])", before):
            continue  # the grid is computed from this number a few lines up: changing one alone breaks it
        if coupled:
            for s, e, v in nums:
                if v == value:
                    spans.append((args_at + g0 + s, args_at + g0 + e, 0))
                elif v == value - 1 and value > 1:
                    spans.append((args_at + g0 + s, args_at + g0 + e, -1))
        sites.append(Site("launch_threads", "gpu_threads", value, "launch", text.line_of(start), sorted(spans)))
    return sites


def _split_top(args: str) -> list[tuple[int, int]]:
    """Offsets of comma-separated arguments at bracket depth 0."""
    out, depth, begin = [], 0, 0
    for i, ch in enumerate(args):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append((begin, i))
            begin = i + 1
    out.append((begin, len(args)))
    return out


@dataclass(frozen=True)
class Marker:
    name: str
    values: tuple[int, ...]
    line: int


def find_markers(source: str, path: str | None) -> list[Marker]:
    out = []
    for m in _MARKER.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        raw = [v.strip() for v in m.group("values").split(",") if v.strip()]
        try:
            values = tuple(int(v, 0) for v in raw)
        except ValueError:
            raise KforgeError(
                f"line {line}: 'kforge: tune {m.group('name')}' lists non-integer values [{m.group('values')}]",
                path=path,
                hint="write integers, e.g. '# kforge: tune BLOCK in [64, 128, 256]'",
            ) from None
        if not values or any(v <= 0 for v in values):
            raise KforgeError(
                f"line {line}: 'kforge: tune {m.group('name')}' needs positive integer values",
                path=path,
                hint="e.g. '# kforge: tune BLOCK in [64, 128, 256]'",
            )
        out.append(Marker(m.group("name"), values, line))
    return out

