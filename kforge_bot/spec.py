"""Kernel specs: the only module that knows how a repository describes its kernels.

Two formats:

1. KernelBench files, found by themselves: a module with `class Model(nn.Module)`, `get_inputs()` and
   `get_init_inputs()`. Candidates define `class ModelNew` with the same constructor and forward.
2. A `kforge.yaml` manifest for kernels in ordinary code::

       version: 1
       kernels:
         softmax:
           file: kernels/softmax.py          # the file the bot may rewrite
           entry: softmax                    # callable in `file` (a function or an nn.Module class)
           reference: kernels/ref.py:softmax # correctness oracle; default: `entry` as first loaded
           inputs: kernels/softmax.py:make_inputs   # inputs(**shape) -> tuple of tensors
           shapes: [{rows: 4096, cols: 1024}, {rows: 1024, cols: 4096}]
           init: {}                          # kwargs for an nn.Module entry
           tolerance: {atol: 1.0e-3, rtol: 1.0e-3}
           targets: [cuda]
           language: triton

Files are read as text and inspected with `ast`; nothing here imports user code (the worker does that,
in a child process). Everything a spec holds is plain data, so it crosses process boundaries as JSON.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.yamlcheck import did_you_mean

MANIFEST_NAME = "kforge.yaml"
LANGUAGES = ("triton", "cuda", "cpp", "c", "torch", "sycl")  # the one vocabulary: manifests and policies
LANGUAGE_ALIASES = {"pytorch": "torch"}  # old spellings, still accepted
TARGET_KINDS = ("cpu", "cuda", "xpu", "mps")  # the device kinds: the one list every module uses
DEFAULT_SEEDS = 3


@dataclass(frozen=True)
class Implementation:
    """Source text plus the symbol to call. `root` goes on sys.path so the source's own imports resolve."""

    source: str
    symbol: str
    filename: str  # a label (and the file name the worker writes the source to)
    root: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Implementation:
        return cls(**data)

    @property
    def digest(self) -> str:
        """Names the source's own folders in a worker (its import, its extension builds). 128 bits: a source
        made to share another's digest would share its compile-ahead build folder."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:32]

    @classmethod
    def from_file(cls, path: str | Path, symbol: str, root: str | Path | None = None) -> Implementation:
        path = Path(path)
        return cls(
            source=_read(path),
            symbol=symbol,
            filename=path.name,
            root=str(Path(root).resolve()) if root is not None else str(path.resolve().parent),
        )


@dataclass(frozen=True)
class KernelSpec:
    """How to run a kernel and what it must compute."""

    name: str
    format: str  # "kernelbench" | "manifest"
    root: str  # absolute directory: the manifest's directory, or the KernelBench file's
    kernel_file: str  # relative to root: the file the bot may rewrite
    entry: str  # symbol a candidate must define
    reference: Implementation  # correctness oracle
    baseline: Implementation  # what a candidate's speed is compared against
    inputs_symbol: str  # input generator, looked up in `inputs_source`
    inputs_source: Implementation  # trusted module holding the input generator (and init inputs)
    init_symbol: str | None = None  # KernelBench get_init_inputs; None for manifest kernels
    init_kwargs: dict[str, Any] = field(default_factory=dict)
    shape_sets: tuple[dict[str, Any], ...] = ({},)
    tolerance: dict[str, float] | None = None
    targets: tuple[str, ...] = ()
    language: str = "torch"
    seeds: int = DEFAULT_SEEDS
    # GPU MODE problems (kforge_bot.spec_gpumode); the defaults are every other format's behaviour.
    timed_shapes: tuple[int, ...] | None = None  # the shape sets that are timed (None: all); the rest are checked only
    seed_kwarg: str | None = None  # the inputs callable's keyword that takes the harness's secret seed
    data_arg: bool = False  # the inputs are one object, passed whole (`custom_kernel(data)`)
    # An extra oracle in the inputs module (GPU MODE's reference.py holds generate_input and check_implementation): it
    # stays the problem's own where a caller swaps the reference (the gate judging a head against its base).
    oracle_symbol: str | None = None
    support: tuple[tuple[str, str], ...] = ()  # (file name, source): modules every implementation imports, beside it
    kernel: Implementation | None = None  # the kernel as written where it is neither (GPU MODE's submission.py)

    def timed_indices(self) -> tuple[int, ...]:
        """The shape sets that are timed: every one, unless the format times a subset (GPU MODE's benchmarks)."""
        return tuple(range(len(self.shape_sets))) if self.timed_shapes is None else self.timed_shapes

    @property
    def kernel_path(self) -> Path:
        return Path(self.root) / self.kernel_file

    def candidate_from_source(self, source: str, filename: str | None = None) -> Implementation:
        """A candidate for this kernel: new text for `kernel_file`, defining `entry`."""
        return Implementation(source=source, symbol=self.entry, filename=filename or Path(self.kernel_file).name,
                              root=self.root)

    def with_baseline(self, baseline: Implementation) -> KernelSpec:
        return replace(self, baseline=baseline)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shape_sets"] = list(self.shape_sets)
        data["targets"] = list(self.targets)
        data["timed_shapes"] = None if self.timed_shapes is None else list(self.timed_shapes)
        data["support"] = [list(pair) for pair in self.support]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelSpec:
        data = dict(data)
        for key in ("reference", "baseline", "inputs_source"):
            data[key] = Implementation.from_dict(data[key])
        if data.get("kernel") is not None:
            data["kernel"] = Implementation.from_dict(data["kernel"])
        data["shape_sets"] = tuple(data["shape_sets"])
        data["targets"] = tuple(data["targets"])
        if data.get("timed_shapes") is not None:
            data["timed_shapes"] = tuple(data["timed_shapes"])
        data["support"] = tuple((str(name), str(text)) for name, text in data.get("support") or ())
        return cls(**data)


# --------------------------------------------------------------------------------------------- helpers


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KforgeError("file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KforgeError(f"cannot read file: {exc}", path=path) from None


def _parse(path: Path, source: str) -> ast.Module:
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


def is_kernelbench_source(source: str) -> bool:
    try:
        names = top_level_names(ast.parse(source))
    except SyntaxError:
        return False
    return names.get("Model") == "class" and "get_inputs" in names and "get_init_inputs" in names


def defines(source: str, symbol: str) -> bool:
    try:
        return symbol in top_level_names(ast.parse(source))
    except SyntaxError:
        return False


def kernel_implementation(spec: KernelSpec) -> Implementation:
    """The code a kernel is, as written: the manifest's entry, or a KernelBench file's ModelNew (Model when
    the file has no ModelNew), or a GPU MODE problem's submission.py (its ref_kernel where it has none). The one
    place that decides which class of a KernelBench file is the kernel."""
    if spec.format == "kernelbench":
        symbol = "ModelNew" if defines(spec.reference.source, "ModelNew") else "Model"
        return replace(spec.reference, symbol=symbol)
    return spec.kernel or spec.baseline


def has_own_reference(spec: KernelSpec) -> bool:
    """Whether the spec names an oracle other than the kernel itself."""
    if spec.format == "kernelbench":
        return defines(spec.reference.source, "ModelNew")
    if spec.format == "gpumode":
        return True  # ref_kernel, whatever submission.py holds
    return spec.reference != spec.baseline


# ---------------------------------------------------------------------------------------- KernelBench


def load_kernelbench(path: str | Path) -> KernelSpec:
    path = Path(path).resolve()
    source = _read(path)
    names = top_level_names(_parse(path, source))
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        raise KforgeError(f"not a KernelBench problem: missing {', '.join(missing)}", path=path,
                          hint="define class Model(nn.Module), get_inputs() and get_init_inputs()")
    reference = Implementation(source=source, symbol="Model", filename=path.name, root=str(path.parent))
    return KernelSpec(
        name=path.stem,
        format="kernelbench",
        root=str(path.parent),
        kernel_file=path.name,
        entry="ModelNew",
        reference=reference,
        baseline=reference,
        inputs_symbol="get_inputs",
        inputs_source=reference,
        init_symbol="get_init_inputs",
        targets=TARGET_KINDS,
        language=_guess_language(source),
    )


def candidate_language(spec: KernelSpec, candidate: Implementation) -> str:
    """The language a candidate is written in: a manifest kernel's is declared (its candidates are versions of
    the same file); a KernelBench candidate's is read from its source (Triton, CUDA through load_inline, ...)."""
    return spec.language if spec.format == "manifest" else _guess_language(candidate.source)


def _guess_language(source: str) -> str:
    if "import triton" in source or "from triton" in source:
        return "triton"
    if "load_inline" in source or "__global__" in source:
        return "cuda"
    if "sycl" in source.lower():
        return "sycl"
    return "torch"


# ------------------------------------------------------------------------------------------- manifest


def find_manifest(start: str | Path) -> Path | None:
    """The nearest kforge.yaml at or above `start`."""
    here = Path(start).resolve()
    if here.is_file():
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / MANIFEST_NAME
        if candidate.is_file():
            return candidate
    return None


def _load_yaml(path: Path) -> Any:
    import yaml  # not at the top: workers import this module (through targets) and never read YAML

    try:
        return yaml.safe_load(_read(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise KforgeError(f"{where}invalid YAML: {getattr(exc, 'problem', exc)}", path=path) from None


def _ref(value: Any, key: str, path: Path, default_file: str) -> tuple[str, str]:
    """Parse 'file.py:callable' (or a bare 'callable' in `default_file`)."""
    if not isinstance(value, str) or not value.strip():
        raise KforgeError(f"{key}: expected 'path/to/file.py:callable', got {value!r}", path=path)
    file_part, sep, symbol = value.rpartition(":")
    if not sep:
        return default_file, value.strip()
    if not file_part.endswith(".py") or not symbol.isidentifier():
        raise KforgeError(f"{key}: expected 'path/to/file.py:callable', got {value!r}", path=path)
    return file_part, symbol


def _implementation(root: Path, rel: str, symbol: str, key: str, manifest: Path,
                    file_key: str | None = None) -> Implementation:
    file_path = (root / rel).resolve()
    if not file_path.is_file():
        raise KforgeError(f"{file_key or key}: file {rel!r} does not exist", path=manifest,
                          hint="paths are relative to the manifest's directory")
    source = _read(file_path)
    if not defines(source, symbol):
        _parse(file_path, source)  # a syntax error is the better message
        raise KforgeError(f"{key}: {rel} defines no top-level {symbol!r}", path=manifest)
    return Implementation(source=source, symbol=symbol, filename=file_path.name, root=str(root))


_KERNEL_KEYS = {"file", "entry", "reference", "inputs", "shapes", "init", "tolerance", "targets", "language", "seeds"}


def _manifest_kernel(name: str, entry: Any, root: Path, manifest: Path) -> KernelSpec:
    where = f"kernels.{name}"
    if not isinstance(entry, dict):
        raise KforgeError(f"{where}: expected a mapping of settings, got {type(entry).__name__}", path=manifest)
    unknown = sorted(set(entry) - _KERNEL_KEYS)
    if unknown:
        raise KforgeError(f"{where}: unknown key {unknown[0]!r}", path=manifest,
                          hint=f"{did_you_mean(unknown[0], sorted(_KERNEL_KEYS))}allowed keys: "
                               f"{', '.join(sorted(_KERNEL_KEYS))}")
    for required in ("file", "entry", "inputs"):
        if required not in entry:
            raise KforgeError(f"{where}: missing required key {required!r}", path=manifest)
    kernel_file = entry["file"]
    if not isinstance(kernel_file, str) or not kernel_file.endswith(".py"):
        raise KforgeError(f"{where}.file: expected a path to a .py file, got {kernel_file!r}", path=manifest)
    symbol = entry["entry"]
    if not isinstance(symbol, str) or not symbol.isidentifier():
        raise KforgeError(f"{where}.entry: expected a Python identifier, got {symbol!r}", path=manifest)
    kernel = _implementation(root, kernel_file, symbol, f"{where}.entry", manifest, file_key=f"{where}.file")

    if "reference" in entry:
        ref_file, ref_symbol = _ref(entry["reference"], f"{where}.reference", manifest, kernel_file)
        reference = _implementation(root, ref_file, ref_symbol, f"{where}.reference", manifest)
    else:
        reference = kernel
    inputs_file, inputs_symbol = _ref(entry["inputs"], f"{where}.inputs", manifest, kernel_file)
    inputs_source = _implementation(root, inputs_file, inputs_symbol, f"{where}.inputs", manifest)

    shapes = entry.get("shapes", [{}])
    if not isinstance(shapes, list) or not shapes or not all(isinstance(s, dict) for s in shapes):
        raise KforgeError(f"{where}.shapes: expected a non-empty list of mappings (keyword arguments for "
                          f"the inputs callable)", path=manifest)
    init = entry.get("init")
    init = {} if init is None else init  # `init:` with no value means none; `init: []` is a mistake
    if not isinstance(init, dict):
        raise KforgeError(f"{where}.init: expected a mapping of keyword arguments", path=manifest)
    tolerance = entry.get("tolerance")
    if tolerance is not None:
        if not isinstance(tolerance, dict) or set(tolerance) - {"atol", "rtol"} or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in tolerance.values()):
            raise KforgeError(f"{where}.tolerance: expected {{atol: number, rtol: number}} with values >= 0",
                              path=manifest)
        tolerance = {k: float(v) for k, v in tolerance.items()}
    targets = entry.get("targets", list(TARGET_KINDS))
    if not isinstance(targets, list) or not targets or any(t not in TARGET_KINDS for t in targets):
        raise KforgeError(f"{where}.targets: expected a list drawn from {', '.join(TARGET_KINDS)}, got {targets!r}",
                          path=manifest)
    language = LANGUAGE_ALIASES.get(entry.get("language", "torch"), entry.get("language", "torch"))
    if language not in LANGUAGES:
        raise KforgeError(f"{where}.language: expected one of {', '.join(LANGUAGES)}, got {language!r}",
                          path=manifest)
    seeds = entry.get("seeds", DEFAULT_SEEDS)
    if not isinstance(seeds, int) or isinstance(seeds, bool) or not 1 <= seeds <= 100:
        raise KforgeError(f"{where}.seeds: expected an integer from 1 to 100, got {seeds!r}", path=manifest)

    return KernelSpec(
        name=name,
        format="manifest",
        root=str(root),
        kernel_file=str(Path(kernel_file)),
        entry=symbol,
        reference=reference,
        baseline=kernel,
        inputs_symbol=inputs_symbol,
        inputs_source=inputs_source,
        init_kwargs=init,
        shape_sets=tuple(shapes),
        tolerance=tolerance,
        targets=tuple(targets),
        language=language,
        seeds=seeds,
    )


def load_manifest_entry(manifest: str | Path, name: str, entry: Any) -> KernelSpec:
    """One kernel of a manifest from its raw `kernels.<name>` entry, validated on its own: a caller
    that must keep a manifest's good kernels when another one is broken (the regression gate) loads
    each entry with this, where `load_manifest` stops at the first error."""
    path = Path(manifest).resolve()
    return _manifest_kernel(str(name), entry, path.parent, path)


def load_manifest(path: str | Path) -> dict[str, KernelSpec]:
    """All kernels of one kforge.yaml, by name."""
    path = Path(path).resolve()
    data = _load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("kernels"), dict) or not data["kernels"]:
        raise KforgeError("expected a top-level 'kernels:' mapping of kernel names to settings", path=path,
                          hint="see the README's kforge.yaml section")
    unknown = sorted(set(data) - {"version", "kernels"})
    if unknown:
        raise KforgeError(f"unknown top-level key {unknown[0]!r}", path=path,
                          hint=f"{did_you_mean(unknown[0], ('version', 'kernels'))}allowed: version, kernels")
    if data.get("version", 1) != 1:
        raise KforgeError(f"version: unsupported manifest version {data['version']!r}", path=path,
                          hint="this kforge-bot reads version 1")
    return {str(name): _manifest_kernel(str(name), entry, path.parent, path) for name, entry in data["kernels"].items()}


# ------------------------------------------------------------------------------------------ entry points


def load_spec(path: str | Path, kernel: str | None = None) -> KernelSpec:
    """A spec from a KernelBench file, a kforge.yaml (with `kernel`), a kernel file a manifest names, or a GPU MODE
    problem (its folder or its task.yml)."""
    from kforge_bot import spec_gpumode  # the GPU MODE layout's own module (it builds on this one)

    path = Path(path)
    if spec_gpumode.is_gpumode_problem(path) and (path.is_dir() or path.name == spec_gpumode.TASK_NAME):
        return spec_gpumode.load_gpumode(path)
    if path.is_dir():
        manifest = path / MANIFEST_NAME
        if not manifest.is_file():
            raise KforgeError("directory has no kforge.yaml", path=path,
                              hint="pass a kernel file, a manifest, or a GPU MODE problem's folder (task.yml and "
                                   "reference.py)")
        path = manifest
    if path.name == MANIFEST_NAME or path.suffix in (".yaml", ".yml"):
        kernels = load_manifest(path)
        if kernel is None:
            if len(kernels) == 1:
                return next(iter(kernels.values()))
            raise KforgeError(f"manifest has {len(kernels)} kernels; choose one with --kernel "
                              f"({', '.join(sorted(kernels))})", path=path)
        if kernel not in kernels:
            raise KforgeError(f"no kernel named {kernel!r} (have: {', '.join(sorted(kernels))})", path=path)
        return kernels[kernel]
    if path.suffix != ".py":
        raise KforgeError("expected a .py kernel file or a kforge.yaml", path=path)
    source = _read(path)
    _parse(path, source)
    if is_kernelbench_source(source):
        return load_kernelbench(path)
    manifest = find_manifest(path)
    if manifest is not None:
        kernels = load_manifest(manifest)
        resolved = path.resolve()
        matches = [k for k in kernels.values() if k.kernel_path.resolve() == resolved
                   and (kernel is None or k.name == kernel)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise KforgeError(f"{manifest} names several kernels in this file; choose one with --kernel "
                              f"({', '.join(k.name for k in matches)})", path=path)
    raise KforgeError("not a KernelBench problem (class Model, get_inputs, get_init_inputs) and not named in "
                      "any kforge.yaml above it", path=path, hint="add it to kforge.yaml or use KernelBench format")


def discover_kernels(root: str | Path) -> list[KernelSpec]:
    """Every managed kernel under `root`: the manifest's kernels and KernelBench problem files."""
    root = Path(root).resolve()
    specs: list[KernelSpec] = []
    manifest = root / MANIFEST_NAME
    if manifest.is_file():
        specs.extend(load_manifest(manifest).values())
    skip_dirs = {".git", ".venv", "venv", "node_modules", "__pycache__", ".kforge-cache", "build", "dist"}
    for file in sorted(root.rglob("*.py")):
        if skip_dirs.intersection(file.relative_to(root).parts):
            continue
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if is_kernelbench_source(source):
            specs.append(load_kernelbench(file))
    return specs
