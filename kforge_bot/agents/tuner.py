"""The built-in tuner: the generator's stand-in when no LLM endpoint is configured.

It finds a kernel's own tunable parameters in its source text, rewrites them with exact, minimal edits,
and searches them by coordinate descent guided by the profile. What counts as tunable:

- Python (Triton, load_inline wrappers): module-level UPPER_CASE int constants with a tunable-looking
  name (BLOCK_SIZE, NUM_WARPS, NUM_STAGES, TILE_M, THREADS, GROUP_M, ...), the same names or
  `num_warps` / `num_stages` assigned once inside a function, `num_warps=` / `num_stages=` keyword
  literals in any call, tunable-looking UPPER_CASE keyword literals in `kernel[grid](...)` launches,
  and every int in `triton.Config({...}, num_warps=.., num_stages=..)` autotune entries.
- C, C++, CUDA, SYCL (a source file, or a string literal in a Python file): `#define NAME value`,
  `constexpr int NAME = value;` (and const/static variants), and `<<<grid, 256>>>` launch shapes (the
  grid's own `(n + 255) / 256` moves with the block size).
- `# kforge: tune NAME in [a, b, c]` or `// kforge: tune NAME in [a, b, c]` anywhere: makes NAME tunable
  (any integer definition of it, whatever its name) and overrides its candidate values.

Pure: no torch, no imports of the kernel; the source is only parsed.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Any, Generator, Mapping, Sequence

from kforge_bot.errors import KforgeError

# Sane bounds per kind; candidates are powers of two inside them (stages: every integer).
BOUNDS: dict[str, tuple[int, int]] = {
    "warps": (1, 32),
    "stages": (1, 6),
    "block": (16, 4096),
    "tile": (16, 256),
    "gpu_threads": (32, 1024),  # threads (work-items) per block (work-group)
    "threads": (1, 0),  # CPU threads: upper bound is os.cpu_count()
    "small": (1, 16),  # GROUP_M, SPLIT_K, UNROLL, VEC
}
BLOCK_WINDOW = 3  # block sizes: at most this many octaves either side of the current value

_MARKER = re.compile(r"(?:#|//)\s*kforge:\s*tune\s+(?P<name>[A-Za-z_][\w.@\[\]]*)\s+in\s+\[(?P<values>[^\]]*)\]")
_GPU_HINTS = re.compile(r"__global__|<<<|threadIdx|blockDim|\btl\.|triton|sycl::|nd_range|nd_item")


@dataclass(frozen=True)
class Tunable:
    name: str  # unique in the file: "BLOCK_SIZE", "num_warps", "autotune[1].BLOCK_M", "launch_threads@42"
    kind: str  # a key of BOUNDS, or "int" (named by a marker only)
    current: int
    candidates: tuple[int, ...]  # ascending, current included
    origin: str  # constant | local | keyword | autotune | define | constexpr | launch
    line: int  # 1-based line of the (first) literal
    spans: tuple[tuple[int, int, int], ...] = field(repr=False)  # (start, end, offset): text[start:end] := value + offset
    marked: bool = False  # candidates come from a `kforge: tune` marker

    def describe(self) -> str:
        return f"{self.name} = {self.current} (line {self.line}, {self.origin}; tries {list(self.candidates)})"


# ---------------------------------------------------------------------------------------------------
# Finding tunables.


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


def candidates_for(kind: str, current: int, *, cpu_count: int | None = None, gpu: bool = True) -> tuple[int, ...]:
    """Powers of two around `current` within the kind's bounds (stages: every integer), current included.
    CPU tiles may go down to 4 (a register block), GPU blocks not below 16."""
    if kind == "int":
        return (current,)
    lo, hi = BOUNDS[kind]
    if not gpu and kind in ("block", "tile"):
        lo = 4
    if kind == "threads":
        hi = max(1, cpu_count or os.cpu_count() or 1)
    values: set[int] = {current}
    if kind == "stages":
        values |= set(range(lo, hi + 1))
    else:
        if kind in ("block", "tile"):
            lo = max(lo, current >> BLOCK_WINDOW)
            hi = min(hi, current << BLOCK_WINDOW)
        p = 1
        while p <= hi:
            if p >= lo:
                values.add(p)
            p <<= 1
        if kind == "threads":
            values.add(hi)
    return tuple(sorted(v for v in values if v > 0))


@dataclass
class _Site:
    base: str
    kind: str | None
    current: int
    origin: str
    line: int
    spans: list[tuple[int, int, int]]


class _Text:
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


def _python_sites(tree: ast.Module, text: _Text, gpu: bool, forced: set[str]) -> tuple[list[_Site], list[tuple[int, int]]]:
    sites: list[_Site] = []
    strings: list[tuple[int, int]] = []

    def add(base: str, kind: str | None, node: ast.AST | None, origin: str) -> None:
        value = _int_value(node)
        if value is None or node is None:
            return
        start, end = text.span(node)
        sites.append(_Site(base, kind, value, origin, node.lineno, [(start, end, 0)]))  # type: ignore[attr-defined]

    def looks_tunable(name: str) -> bool:
        return bool(_is_upper(name) and kind_of(name, gpu=gpu)) or name in forced

    # Module-level constants.
    for node in tree.body:
        target, value = _simple_assign(node)
        if target and looks_tunable(target):
            add(target, kind_of(target, gpu=gpu), value, "constant")

    # Assignments inside functions, each name assigned exactly once there.
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
                add(name, "warps" if name == "num_warps" else "stages", value, "local")
            elif looks_tunable(name):
                add(name, kind_of(name, gpu=gpu), value, "local")

    # Calls: autotune configs, launch keywords, num_warps / num_stages anywhere.
    config_index = 0
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        func = call.func
        is_config = (isinstance(func, ast.Attribute) and func.attr == "Config") or (isinstance(func, ast.Name) and func.id == "Config")
        if is_config:
            prefix = f"autotune[{config_index}]."
            config_index += 1
            if call.args and isinstance(call.args[0], ast.Dict):
                for key, value in zip(call.args[0].keys, call.args[0].values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        add(prefix + key.value, kind_of(key.value, gpu=gpu) or "int", value, "autotune")
            for kw in call.keywords:
                if kw.arg in ("num_warps", "num_stages"):
                    add(prefix + kw.arg, "warps" if kw.arg == "num_warps" else "stages", kw.value, "autotune")
            continue
        is_launch = isinstance(func, ast.Subscript)
        for kw in call.keywords:
            if kw.arg in ("num_warps", "num_stages"):
                add(kw.arg, "warps" if kw.arg == "num_warps" else "stages", kw.value, "keyword")
            elif kw.arg and (is_launch or kw.arg in forced) and looks_tunable(kw.arg):
                add(kw.arg, kind_of(kw.arg, gpu=gpu), kw.value, "keyword")

    for sub in ast.walk(tree):
        if isinstance(sub, ast.JoinedStr) or (isinstance(sub, ast.Constant) and isinstance(sub.value, str)):
            strings.append(text.span(sub))
    strings = _outermost(strings)
    return sites, strings


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


def _c_sites(source: str, regions: Sequence[tuple[int, int]], text: _Text, gpu: bool, forced: set[str]) -> list[_Site]:
    sites: list[_Site] = []
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


def _c_named(sites: list[_Site], m: re.Match[str], group: str, origin: str, base: int, text: _Text, gpu: bool, forced: set[str], launch_names: set[str]) -> None:
    name = m.group("name")
    kind = "gpu_threads" if name in launch_names and gpu else kind_of(name, gpu=gpu) if _is_upper(name) else None
    if kind is None and name not in forced:
        return
    start, end = base + m.start(group), base + m.end(group)
    sites.append(_Site(name, kind, int(m.group(group)), origin, text.line_of(start), [(start, end, 0)]))


def _launch_sites(chunk: str, base: int, text: _Text) -> list[_Site]:
    """`<<<grid, 256[, smem[, stream]]>>>`: the block literal, plus the same number (and number - 1,
    as in `(n + 255) / 256`) inside the grid expression, which must move with it. When the number is
    not in the grid expression but appears in the lines just above (`blocks = (n + 255) / 256;`), the
    launch is coupled to code this rewrite cannot see safely, and it is not tuned."""
    sites: list[_Site] = []
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
        sites.append(_Site("launch_threads", "gpu_threads", value, "launch", text.line_of(start), sorted(spans)))
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
class _Marker:
    name: str
    values: tuple[int, ...]
    line: int


def _markers(source: str, path: str | None) -> list[_Marker]:
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
        out.append(_Marker(m.group("name"), values, line))
    return out


def _is_gpu(source: str, language: str | None) -> bool:
    lang = (language or "").lower()
    if lang in ("cuda", "triton", "sycl"):
        return True
    if lang in ("c", "cpp"):
        return bool(re.search(r"__global__|<<<|threadIdx|blockDim|sycl::", source))
    return bool(_GPU_HINTS.search(source))


def find_tunables(source: str, language: str | None = None, *, path: str | None = None, cpu_count: int | None = None) -> list[Tunable]:
    """Every tunable parameter of a kernel source, in source order. Names are stable under `apply`.

    language: the spec's language ("triton", "cuda", "c", "cpp", "sycl", "torch"); None to infer.
    path: only for error messages (a malformed marker is a KforgeError naming the file)."""
    markers = _markers(source, path)
    forced = {m.name for m in markers}
    gpu = _is_gpu(source, language)
    text = _Text(source)
    try:
        tree: ast.Module | None = ast.parse(source)
    except SyntaxError:
        tree = None
    if tree is not None:
        sites, strings = _python_sites(tree, text, gpu, forced)
        sites += _c_sites(source, strings, text, gpu, forced)
    else:
        sites = _c_sites(source, [(0, len(source))], text, gpu, forced)
    # One site per literal (a function nested in another is walked twice).
    unique: dict[int, _Site] = {}
    for s in sites:
        unique.setdefault(s.spans[0][0], s)
    sites = sorted(unique.values(), key=lambda s: s.spans[0][0])

    counts: dict[str, int] = {}
    for s in sites:
        counts[s.base] = counts.get(s.base, 0) + 1
    seen: dict[str, int] = {}
    tunables: list[Tunable] = []
    for s in sites:
        name = s.base if counts[s.base] == 1 else f"{s.base}@{s.line}"
        if name in seen:  # two sites of one name on one line
            seen[name] += 1
            name = f"{name}.{seen[name]}"
        else:
            seen[name] = 0
        kind = s.kind or "int"
        values = candidates_for(kind, s.current, cpu_count=cpu_count, gpu=gpu)
        tunables.append(Tunable(name, kind, s.current, values, s.origin, s.line, tuple(s.spans)))

    for marker in markers:
        hits = [t for t in tunables if t.name == marker.name or t.name.split("@")[0] == marker.name]
        if len(hits) > 1:  # several sites of one name: the marker picks the one on its line or the next
            near = [t for t in hits if t.line in (marker.line, marker.line + 1)]
            hits = near or hits
        if not hits:
            raise KforgeError(
                f"line {marker.line}: 'kforge: tune {marker.name}' names no integer constant, #define, "
                f"constexpr or keyword literal of that name",
                path=path,
                hint="put the marker next to a line like 'NAME = 128' or '#define NAME 128', or fix the name",
            )
        for t in hits:
            values = tuple(sorted(set(marker.values) | {t.current}))
            tunables[tunables.index(t)] = Tunable(t.name, t.kind, t.current, values, t.origin, t.line, t.spans, marked=True)
    return tunables


# ---------------------------------------------------------------------------------------------------
# Rewriting.


def apply(source: str, assignment: Mapping[str, int], language: str | None = None) -> str:
    """`source` with each named tunable set to its value: only the digits of its literals change."""
    tunables = {t.name: t for t in find_tunables(source, language)}
    edits: list[tuple[int, int, str]] = []
    for name, value in assignment.items():
        if name not in tunables:
            known = ", ".join(tunables) or "none"
            raise KeyError(f"no tunable named {name!r} in this source (found: {known})")
        if type(value) is not int or value <= 0:
            raise ValueError(f"tunable {name!r} needs a positive int, got {value!r}")
        t = tunables[name]
        if value == t.current:
            continue
        for start, end, offset in t.spans:
            if value + offset < 0:
                raise ValueError(f"tunable {name!r}: {value} makes a linked literal negative")
            edits.append((start, end, str(value + offset)))
    edits.sort()
    for (_s1, e1, _), (s2, _e2, _) in zip(edits, edits[1:], strict=False):
        if s2 < e1:
            raise ValueError("overlapping edits: two tunables share a literal")
    out = source
    for start, end, new in reversed(edits):
        out = out[:start] + new + out[end:]
    return out


def current_assignment(tunables: Sequence[Tunable]) -> dict[str, int]:
    return {t.name: t.current for t in tunables}


# ---------------------------------------------------------------------------------------------------
# Profile hint.


def _number(d: Any, *names: str) -> float | None:
    if not isinstance(d, Mapping):
        return None
    for n in names:
        v = d.get(n)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def profile_hint(digest: Mapping[str, Any] | None) -> str | None:
    """'memory', 'compute', 'launch', 'registers' or 'occupancy' from a profile digest, or None when it says
    too little.

    The hardware's own counters come first when the digest has them (the collector's ncu rows, longest
    kernel): spills, or occupancy capped by registers below half, -> 'registers' (more warps, smaller
    blocks); under-occupied (ncu_parse.classify) -> 'occupancy' (smaller blocks, more of them); else the
    class they imply. Otherwise (whichever are present): roofline.bound ("memory"/"compute"; "unknown" is
    ignored); a device time per call (device_us) under 20 us (launch-bound); ncu DRAM vs SM throughput;
    roofline arithmetic_intensity vs ridge_intensity."""
    if not digest:
        return None
    counted = _counter_hint(digest.get("ncu"))
    if counted is not None:
        return counted
    roof = digest.get("roofline") or {}
    bound = str(roof.get("bound") or digest.get("bound") or "").lower()
    if bound.startswith("mem"):
        return "memory"
    if bound.startswith("comp"):
        return "compute"
    if bound.startswith(("launch", "latency", "overhead")):
        return "launch"
    time_us = _number(digest, "device_us", "total_time_us", "time_us")
    if time_us is None:
        ms = _number(digest, "total_time_ms", "time_ms")
        time_us = ms * 1000.0 if ms is not None else None
    if time_us is not None and time_us < 20.0:
        return "launch"
    ncu = digest.get("ncu") or {}
    if isinstance(ncu, Mapping) and ncu and all(isinstance(v, Mapping) for v in ncu.values()):
        ncu = max(ncu.values(), key=lambda m: _number(m, "duration_us", "time_us") or 0.0)  # the longest kernel
    if isinstance(ncu, Sequence) and not isinstance(ncu, str) and ncu:
        ncu = max(ncu, key=lambda m: _number(m, "duration_us", "time_us") or 0.0)
    dram = _number(ncu, "dram_throughput_pct", "memory_throughput_pct", "dram_pct")
    sm = _number(ncu, "sm_throughput_pct", "compute_throughput_pct", "sm_pct")
    if dram is not None and sm is not None:
        return "memory" if dram >= sm else "compute"
    intensity = _number(roof, "arithmetic_intensity")
    ridge = _number(roof, "ridge_intensity")
    if intensity is not None and ridge:
        return "memory" if intensity < ridge else "compute"
    return None


def _counter_hint(rows: Any) -> str | None:
    from kforge_bot.evaluate import ncu_parse

    if not (isinstance(rows, Sequence) and not isinstance(rows, str) and rows
            and all(isinstance(r, Mapping) and "duration_us" in r for r in rows)):
        return None
    top = max(rows, key=lambda r: _number(r, "duration_us") or 0.0)
    occupancy = _number(top, "achieved_occupancy_pct")
    if (_number(top, "spills") or 0.0) > 0 or (top.get("occupancy_limiter") == "registers"
                                               and occupancy is not None and occupancy < 50.0):
        return "registers"
    return {"under-occupied": "occupancy", "memory-bound": "memory", "compute-bound": "compute",
            "latency-bound": "launch"}.get(ncu_parse.classify(dict(top)))


# ---------------------------------------------------------------------------------------------------
# Search.

# Per hint: kinds in visiting order, and the direction (+1 larger, -1 smaller) to try first.
_PLANS: dict[str | None, list[tuple[str, int]]] = {
    None: [("threads", 1), ("warps", 1), ("block", 1), ("tile", 1), ("gpu_threads", 1), ("stages", 1), ("small", 1), ("int", 1)],
    "memory": [("block", 1), ("tile", 1), ("gpu_threads", 1), ("warps", 1), ("threads", 1), ("small", 1), ("stages", 1), ("int", 1)],
    "launch": [("block", 1), ("tile", 1), ("gpu_threads", 1), ("threads", -1), ("warps", 1), ("small", 1), ("stages", -1), ("int", 1)],
    "compute": [("stages", 1), ("tile", 1), ("block", 1), ("warps", 1), ("gpu_threads", 1), ("small", 1), ("threads", 1), ("int", 1)],
    # Registers cap occupancy (or spill): spread a block over more warps, or give each thread less to hold.
    "registers": [("warps", 1), ("block", -1), ("tile", -1), ("stages", -1), ("gpu_threads", 1), ("threads", 1), ("small", 1), ("int", 1)],
    # Too few warps resident or under one wave of blocks: more, smaller blocks.
    "occupancy": [("block", -1), ("tile", -1), ("gpu_threads", -1), ("warps", 1), ("stages", -1), ("threads", 1), ("small", 1), ("int", 1)],
}


def _key(assignment: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(assignment.items()))


class TunerSearch:
    """Coordinate descent over tunables from the current values, one parameter at a time.

    For each parameter (in an order set by the profile hint), step to the neighbouring candidate in the
    preferred direction while the score improves by more than `min_gain`; if the first step fails, try
    the other direction. Passes repeat until one changes nothing (or `max_passes`). A score is
    "higher is better" (the speedup over the baseline); None marks a failed candidate.

        search = TunerSearch(tunables, hint=profile_hint(digest))
        while not search.done():
            assignment = search.propose()
            search.record(assignment, speedup_or_None)
        best_assignment, best_speedup = search.best

    The current values count as tried with `baseline_score` (1.0: the baseline itself); pass None to
    have them proposed and measured first. Nothing is ever proposed twice. To resume, `record` the
    earlier results before the first `propose`: the plan replays through them without proposing any.
    """

    def __init__(
        self,
        tunables: Sequence[Tunable],
        current: Mapping[str, int] | None = None,
        *,
        hint: str | None = None,
        min_gain: float = 0.01,
        max_trials: int | None = None,
        max_passes: int = 3,
        baseline_score: float | None = 1.0,
    ):
        self.tunables = list(tunables)
        self.current = dict(current) if current is not None else current_assignment(self.tunables)
        missing = [t.name for t in self.tunables if t.name not in self.current]
        if missing:
            raise KeyError(f"current values missing for {missing}")
        self.hint = hint
        self.min_gain = min_gain
        self.max_trials = max_trials
        self.max_passes = max_passes
        self.results: dict[tuple[tuple[str, int], ...], float | None] = {}
        self.history: list[tuple[dict[str, int], float | None]] = []
        self.proposed = 0
        if baseline_score is not None:
            self.results[_key(self.current)] = baseline_score
        self._best: tuple[dict[str, int], float | None] = (dict(self.current), baseline_score)
        self._pending: dict[str, int] | None = None
        self._lookahead: dict[str, int] | None = None
        self._exhausted = False
        self._plan = self._walk()

    # The order the parameters are visited in, with the first direction for each.
    def order(self) -> list[tuple[Tunable, int]]:
        plan = _PLANS.get(self.hint, _PLANS[None])
        rank = {kind: (i, d) for i, (kind, d) in enumerate(plan)}
        indexed = list(enumerate(self.tunables))
        indexed.sort(key=lambda it: (not it[1].marked, rank.get(it[1].kind, (len(plan), 1))[0], it[0]))
        return [(t, rank.get(t.kind, (0, 1))[1]) for _, t in indexed]

    @property
    def best(self) -> tuple[dict[str, int], float | None]:
        return dict(self._best[0]), self._best[1]

    def record(self, assignment: Mapping[str, int], score: float | None) -> None:
        key = _key(assignment)
        self.results[key] = score
        self.history.append((dict(assignment), score))
        if self._pending is not None and _key(self._pending) == key:
            self._pending = None
        # The same acceptance rule as the descent: a gain within min_gain is noise, not progress.
        if score is not None and (self._best[1] is None or score > self._best[1] * (1.0 + self.min_gain)):
            self._best = (dict(assignment), score)

    def done(self) -> bool:
        if self._pending is not None:
            return False
        if self.max_trials is not None and self.proposed >= self.max_trials:
            return True
        self._peek()
        return self._exhausted

    def propose(self) -> dict[str, int] | None:
        """The next assignment to measure (all parameters), or None when the search is over."""
        if self._pending is not None:
            raise RuntimeError("record the result of the previous proposal before asking for another")
        if self.done():
            return None
        proposal, self._lookahead = self._lookahead, None
        assert proposal is not None
        self._pending = proposal
        self.proposed += 1
        return dict(proposal)

    def _peek(self) -> None:
        if self._lookahead is None and not self._exhausted:
            try:
                self._lookahead = next(self._plan)
            except StopIteration:
                self._exhausted = True

    def _ask(self, trial: dict[str, int]) -> Generator[dict[str, int], None, float | None]:
        key = _key(trial)
        if key not in self.results:
            yield trial
        return self.results.get(key)

    def _walk(self) -> Generator[dict[str, int], None, None]:
        best = dict(self.current)
        best_score = yield from self._ask(best)
        for _ in range(self.max_passes):
            improved = False
            for t, first in self.order():
                if len(t.candidates) < 2:
                    continue
                for direction in (first, -first):
                    moved = False
                    values = list(t.candidates)
                    idx = values.index(best[t.name]) if best[t.name] in values else _nearest(values, best[t.name])
                    while 0 <= idx + direction < len(values):
                        idx += direction
                        trial = {**best, t.name: values[idx]}
                        score = yield from self._ask(trial)
                        if score is not None and (best_score is None or score > best_score * (1.0 + self.min_gain)):
                            best, best_score, moved, improved = trial, score, True, True
                        else:
                            break
                    if moved:
                        break  # the first direction paid off: the other side is not worth a look
            if not improved:
                break


def _nearest(values: list[int], value: int) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - value))
