"""A kernel's tunable parameters: found in its source (kforge_bot.tuner.sites), each with the values
worth trying, and rewritten with exact, minimal edits (only the digits of its literals change).

What counts as tunable:

- Python (Triton, load_inline wrappers): module-level UPPER_CASE int constants with a tunable-looking
  name (BLOCK_SIZE, NUM_WARPS, NUM_STAGES, TILE_M, THREADS, GROUP_M, ...), the same names or
  `num_warps` / `num_stages` assigned once inside a function, `num_warps=` / `num_stages=` keyword
  literals in any call, tunable-looking UPPER_CASE keyword literals in `kernel[grid](...)` launches,
  every int in `triton.Config({...}, num_warps=.., num_stages=..)` autotune entries (and in the lists an
  autotune comprehension iterates), and the sizes a launch helper assigns and returns
  (`def calculate_settings(n): ... num_warps = 8 ... return BLOCK_SIZE, num_warps`), branch by branch.
  When the helper is imported, its call's warps, stages and tile sides (`BLOCK_SIZE, num_warps =
  calculate_settings(n)`) are pinned by a statement after it (`; num_warps = 8`): their value as written
  is UNPINNED (0), the helper's choice at run time.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kforge_bot.errors import KforgeError
from kforge_bot.tuner.sites import (UNPINNED, Marker, Pin, Site, SourceText, c_sites, find_markers,
                                    python_sites)

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
# Where a pin site's UNPINNED value sits among its candidates: just above Triton's defaults (4 warps, 3
# stages) and a mid-size tile, so the search's first steps from it try a value either side.
_UNPINNED_AFTER = {"warps": 4, "stages": 3, "tile": 64}

_GPU_HINTS = re.compile(r"__global__|<<<|threadIdx|blockDim|\btl\.|triton|sycl::|nd_range|nd_item")


@dataclass(frozen=True)
class Tunable:
    name: str  # unique in the file: "BLOCK_SIZE", "num_warps", "autotune[1].BLOCK_M", "launch_threads@42"
    kind: str  # a key of BOUNDS, or "int" (named by a marker only)
    current: int
    candidates: tuple[int, ...]  # ascending, current included; a pin site's UNPINNED (0) sits mid-list
    origin: str  # constant | local | keyword | autotune | helper | call | define | constexpr | launch
    line: int  # 1-based line of the (first) literal
    spans: tuple[tuple[int, int, int], ...] = field(repr=False)  # (start, end, offset): text[start:end] := value + offset
    marked: bool = False  # candidates come from a `kforge: tune` marker
    group: str | None = None  # one autotune list (`configs@LINE`) or launch helper (`name()`): moved together
    pin: Pin | None = field(default=None, repr=False)  # origin "call": set by a pin statement, not a literal

    @property
    def current_text(self) -> str:
        return value_text(self.current)

    def describe(self) -> str:
        tries = ", ".join(value_text(v) for v in self.candidates)
        return f"{self.name} = {self.current_text} (line {self.line}, {self.origin}; tries [{tries}])"


def value_text(value: int) -> str:
    """A tunable's value for people: UNPINNED (only a pin site has it) reads "as written"."""
    return "as written" if value == UNPINNED else str(value)


def pin_candidates(kind: str, *, gpu: bool = True) -> tuple[int, ...]:
    """A pin site's values: UNPINNED, then the kind's usual candidates around it (none for a kind it does not
    place: a `kforge: tune` marker names them)."""
    if kind not in _UNPINNED_AFTER:
        return (UNPINNED,)
    values = list(candidates_for(kind, _UNPINNED_AFTER[kind], gpu=gpu))
    at = values.index(_UNPINNED_AFTER[kind]) + 1
    return tuple(values[:at] + [UNPINNED] + values[at:])


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


def _is_gpu(source: str, language: str | None) -> bool:
    lang = (language or "").lower()
    if lang in ("cuda", "triton", "sycl"):
        return True
    if lang in ("c", "cpp"):
        return bool(re.search(r"__global__|<<<|threadIdx|blockDim|sycl::", source))
    return bool(_GPU_HINTS.search(source))


def find_tunables(source: str, language: str | None = None, *, path: str | None = None,
                  cpu_count: int | None = None) -> list[Tunable]:
    """Every tunable parameter of a kernel source, in source order. Names are stable under `apply`.

    language: the spec's language ("triton", "cuda", "c", "cpp", "sycl", "torch"); None to infer.
    path: only for error messages (a malformed marker is a KforgeError naming the file)."""
    markers = find_markers(source, path)
    gpu = _is_gpu(source, language)
    sites = _scan(source, gpu, {m.name for m in markers})
    tunables = [_tunable(s, name, gpu, cpu_count) for s, name in zip(sites, _site_names(sites), strict=True)]
    for marker in markers:
        _mark(tunables, marker, path)
    return tunables


def _scan(source: str, gpu: bool, forced: set[str]) -> list[Site]:
    """The sites of a source, one per literal, in source order: a Python file through its syntax tree (and C in
    its string literals), anything else as C."""
    text = SourceText(source)
    try:
        tree: ast.Module | None = ast.parse(source)
    except SyntaxError:
        tree = None
    if tree is not None:
        sites, strings = python_sites(tree, text, gpu, forced)
        sites += c_sites(source, strings, text, gpu, forced)
    else:
        sites = c_sites(source, [(0, len(source))], text, gpu, forced)
    # One site per literal (a function nested in another is walked twice).
    unique: dict[int, Site] = {}
    for s in sites:
        unique.setdefault(s.anchor, s)
    return sorted(unique.values(), key=lambda s: s.anchor)


def _site_names(sites: Sequence[Site]) -> list[str]:
    """Each site's name: its base when unique in the file, else `base@line`, and `base@line.N` for the Nth
    more on one line."""
    counts: dict[str, int] = {}
    for s in sites:
        counts[s.base] = counts.get(s.base, 0) + 1
    seen: dict[str, int] = {}
    names: list[str] = []
    for s in sites:
        name = s.base if counts[s.base] == 1 else f"{s.base}@{s.line}"
        if name in seen:  # two sites of one name on one line
            seen[name] += 1
            name = f"{name}.{seen[name]}"
        else:
            seen[name] = 0
        names.append(name)
    return names


def _tunable(s: Site, name: str, gpu: bool, cpu_count: int | None) -> Tunable:
    """A site as a tunable, with the candidates its kind tries."""
    kind = s.kind or "int"
    if s.pin is not None:
        values = pin_candidates(kind, gpu=gpu)
        values = values if s.current in values else tuple(sorted({*values, s.current}))  # a pin by hand
    else:
        values = candidates_for(kind, s.current, cpu_count=cpu_count, gpu=gpu)
    return Tunable(name, kind, s.current, values, s.origin, s.line, tuple(s.spans), group=s.group, pin=s.pin)


def _mark(tunables: list[Tunable], marker: Marker, path: str | None) -> None:
    """Gives the tunables a `kforge: tune` marker names its values (in place); a KforgeError when it names none."""
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
        tunables[tunables.index(t)] = Tunable(t.name, t.kind, t.current, values, t.origin, t.line, t.spans,
                                              marked=True, group=t.group, pin=t.pin)


# ---------------------------------------------------------------------------------------------------
# Rewriting.


def apply(source: str, assignment: Mapping[str, int], language: str | None = None) -> str:
    """`source` with each named tunable set to its value: only the digits of its literals change, or a pin
    statement is added, rewritten or (UNPINNED) removed after a helper's call."""
    tunables = {t.name: t for t in find_tunables(source, language)}
    edits: list[tuple[int, int, int, str]] = []  # (start, end, order of pins at one place, text)
    for name, value in assignment.items():
        if name not in tunables:
            known = ", ".join(tunables) or "none"
            raise KeyError(f"no tunable named {name!r} in this source (found: {known})")
        t = tunables[name]
        if type(value) is not int or value < 0 or (value == UNPINNED and t.pin is None):
            raise ValueError(f"tunable {name!r} needs a positive int, got {value!r}")
        if value == t.current:
            continue
        if t.pin is not None:
            edits.append((t.pin.start, t.pin.end, t.pin.anchor, "" if value == UNPINNED else t.pin.statement(value)))
            continue
        for start, end, offset in t.spans:
            if value + offset < 0:
                raise ValueError(f"tunable {name!r}: {value} makes a linked literal negative")
            edits.append((start, end, 0, str(value + offset)))
    edits.sort()
    for (_s1, e1, _, _), (s2, _e2, _, _) in zip(edits, edits[1:], strict=False):
        if s2 < e1:
            raise ValueError("overlapping edits: two tunables share a literal")
    out = source
    for start, end, _, new in reversed(edits):
        out = out[:start] + new + out[end:]
    return out


def current_assignment(tunables: Sequence[Tunable]) -> dict[str, int]:
    return {t.name: t.current for t in tunables}
