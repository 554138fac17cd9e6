"""A manifest's `workloads:` section: programs that use the repository's kernels as its users do.

    workloads:
      decode:
        file: tinylm/workload_cpu.py     # the program, imported as its users import the library
        entry: decode                    # entry(*inputs) is what is timed: one call, one step
        inputs: tinylm/workload_cpu.py:make_inputs   # make(seed=, device=, **args) -> tuple, untimed
        args: {size: tiny, new_tokens: 16}
        seed: 0
        unit: tokens/s                   # tokens/s | samples/s | ms/step
        items: 16                        # tokens (samples) one call produces, for the /s units
        compare: {tokens: 16}            # the first N greedy tokens exactly, or {logits: {atol: .., rtol: ..}}
        warmup: 2                        # untimed calls in each process (compilation included)
        repeats: 5                       # timed calls in each process
        targets: [cpu]
        import_roots: [src]

Read as text (nothing here imports user code). In a pull request every field comes from the base branch.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kforge_bot.config.reader import is_safe_name
from kforge_bot.config.yamlcheck import did_you_mean
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import TARGET_KINDS, import_roots_field, module_name

UNITS = ("tokens/s", "samples/s", "ms/step")
COMPARISONS = ("tokens", "logits")
MAX_WORKLOADS = 32
_KEYS = frozenset({"file", "entry", "inputs", "args", "seed", "unit", "items", "compare", "warmup", "repeats",
                   "targets", "import_roots"})
_REF_RE = re.compile(r"^(?P<file>[^:]+\.py)(?::(?P<symbol>[A-Za-z_][A-Za-z0-9_]*))?$")


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload, as plain data (it crosses into the worker as JSON)."""

    name: str
    root: str  # absolute: the manifest's folder at the revision it was read from
    manifest: str  # the manifest's path, as given
    file: str  # relative to root: the program
    module: str  # the program's module name
    entry: str
    inputs_file: str
    inputs_module: str
    inputs_symbol: str
    args: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    unit: str = "ms/step"
    items: int = 1
    compare: dict[str, Any] = field(default_factory=dict)  # {"tokens": N} or {"logits": {"atol", "rtol"}}
    warmup: int = 2
    repeats: int = 5
    targets: tuple[str, ...] = TARGET_KINDS
    import_roots: tuple[str, ...] = ()

    @property
    def sys_paths(self) -> list[str]:
        """What the program's process puts on sys.path: the import roots, then the manifest's folder."""
        root = Path(self.root)
        return [str((root / r).resolve()) for r in self.import_roots] + [str(root)]

    @property
    def sources(self) -> list[Path]:
        """The files the workload starts from (the dependency scan follows their imports)."""
        return [Path(self.root) / self.file, Path(self.root) / self.inputs_file]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"], data["import_roots"] = list(self.targets), list(self.import_roots)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkloadSpec:
        return cls(**{**data, "targets": tuple(data["targets"]), "import_roots": tuple(data["import_roots"])})


def load_workloads(manifest: str | Path, raw: Any) -> dict[str, WorkloadSpec]:
    """The `workloads:` section of a manifest (`raw`: its parsed value; None: none), each entry checked, or a
    one-line KforgeError naming the manifest, the entry and the fix."""
    path = Path(manifest).resolve()
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        raise KforgeError("workloads: expected a mapping of workload names to settings", path=path,
                          hint="see kforge-bot's docs/workloads.md")
    if len(raw) > MAX_WORKLOADS:
        raise KforgeError(f"workloads: {len(raw)} workloads, at most {MAX_WORKLOADS}", path=path)
    return {name: _workload(name, entry, path) for name, entry in raw.items()}


def _workload(name: Any, entry: Any, manifest: Path) -> WorkloadSpec:
    if not is_safe_name(name):
        raise KforgeError(f"workloads: {ascii(name)[:40]} is not a name (letters, digits and ._-, at most 64)",
                          path=manifest)
    where = f"workloads.{name}"
    if not isinstance(entry, dict):
        raise KforgeError(f"{where}: expected a mapping of settings, got {type(entry).__name__}", path=manifest)
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise KforgeError(f"{where}: unknown key {unknown[0]!r}", path=manifest,
                          hint=f"{did_you_mean(unknown[0], sorted(_KEYS))}allowed keys: {', '.join(sorted(_KEYS))}")
    for required in ("file", "entry", "unit", "compare"):
        if required not in entry:
            raise KforgeError(f"{where}: missing required key {required!r}", path=manifest,
                              hint="a workload needs file, entry, unit and compare")
    root = manifest.parent
    import_roots = import_roots_field(entry.get("import_roots"), where, root, manifest, root)
    roots = [root / r for r in import_roots] + [root]
    program = _python_file(entry["file"], f"{where}.file", root, manifest)
    entry_name = entry["entry"]
    if not isinstance(entry_name, str) or not entry_name.isidentifier():
        raise KforgeError(f"{where}.entry: expected a function name in {program}, got {entry_name!r}", path=manifest)
    inputs = entry.get("inputs", f"{program}:make_inputs")
    match = _REF_RE.match(inputs) if isinstance(inputs, str) else None
    if match is None:
        raise KforgeError(f"{where}.inputs: expected 'file.py:function', got {inputs!r}", path=manifest)
    inputs_file = _python_file(match["file"], f"{where}.inputs", root, manifest)
    modules = {f: module_name(f, roots, root) for f in (program, inputs_file)}
    for rel, module in modules.items():
        if module is None:
            raise KforgeError(f"{where}: {rel} has no module name below the manifest's folder or its import_roots",
                              path=manifest, hint="every folder on the way must be a Python identifier")
    args = entry.get("args") or {}
    if not isinstance(args, dict) or not all(isinstance(k, str) and k.isidentifier() for k in args):
        raise KforgeError(f"{where}.args: expected a mapping of keyword arguments for the inputs function",
                          path=manifest)
    if {"seed", "device"} & set(args):
        raise KforgeError(f"{where}.args: seed and device are passed by the bot", path=manifest,
                          hint=f"set {where}.seed instead; the device is the one the gate measures on")
    unit = entry["unit"]
    if unit not in UNITS:
        raise KforgeError(f"{where}.unit: expected one of {', '.join(UNITS)}, got {unit!r}", path=manifest)
    items = _integer(entry.get("items", 1), f"{where}.items", manifest, 1, 1 << 30)
    if unit != "ms/step" and "items" not in entry:
        raise KforgeError(f"{where}.items: a {unit} workload says how many {unit[:-2]} one call produces",
                          path=manifest, hint="e.g. items: 32")
    targets = entry.get("targets", list(TARGET_KINDS))
    if not isinstance(targets, list) or not targets or any(t not in TARGET_KINDS for t in targets):
        raise KforgeError(f"{where}.targets: expected a list drawn from {', '.join(TARGET_KINDS)}, got {targets!r}",
                          path=manifest)
    return WorkloadSpec(
        name=name, root=str(root), manifest=str(manifest), file=program, module=str(modules[program]),
        entry=entry_name, inputs_file=inputs_file, inputs_module=str(modules[inputs_file]),
        inputs_symbol=match["symbol"] or "make_inputs", args=dict(args),
        seed=_integer(entry.get("seed", 0), f"{where}.seed", manifest, 0, 2**31 - 1), unit=unit, items=items,
        compare=_compare(entry["compare"], where, manifest),
        warmup=_integer(entry.get("warmup", 2), f"{where}.warmup", manifest, 1, 100),
        repeats=_integer(entry.get("repeats", 5), f"{where}.repeats", manifest, 1, 1000),
        targets=tuple(targets), import_roots=import_roots)


def _compare(value: Any, where: str, manifest: Path) -> dict[str, Any]:
    hint = ("e.g. compare: {tokens: 32} (the first 32 greedy tokens exactly) or "
            "compare: {logits: {atol: 0.01, rtol: 0.01}}")
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in COMPARISONS:
        raise KforgeError(f"{where}.compare: expected one of tokens: N or logits: {{atol, rtol}}", path=manifest,
                          hint=hint)
    if "tokens" in value:
        return {"tokens": _integer(value["tokens"], f"{where}.compare.tokens", manifest, 1, 1 << 20)}
    tol = value["logits"]
    if not isinstance(tol, dict) or set(tol) - {"atol", "rtol"} or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in tol.values()):
        raise KforgeError(f"{where}.compare.logits: expected {{atol: number, rtol: number}} with values >= 0",
                          path=manifest, hint=hint)
    return {"logits": {"atol": float(tol.get("atol", 1e-5)), "rtol": float(tol.get("rtol", 1e-5))}}


def _integer(value: Any, key: str, manifest: Path, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise KforgeError(f"{key}: expected an integer from {low} to {high}, got {value!r}", path=manifest)
    return value


def _python_file(value: Any, key: str, root: Path, manifest: Path) -> str:
    if not isinstance(value, str) or not value.endswith(".py") or value.startswith(("/", "~")):
        raise KforgeError(f"{key}: expected a relative path to a .py file, got {value!r}", path=manifest)
    path = (root / value).resolve()
    if not path.is_relative_to(root.resolve()):
        raise KforgeError(f"{key}: {value!r} lies outside the manifest's folder", path=manifest)
    if not path.is_file():
        raise KforgeError(f"{key}: file {value!r} does not exist", path=manifest,
                          hint="paths are relative to the manifest's directory")
    return Path(value).as_posix()
