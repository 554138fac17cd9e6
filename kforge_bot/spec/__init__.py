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
           import_roots: [src]               # folders on sys.path (a src/ layout), in the bot's resolving and workers
           outputs: 0                        # which of the entry's returns are results (index, name, or a list)
           inplace: [q, k]                   # inputs the call writes: compared after the call
           backward: {inputs: [x, w]}        # gradients checked against the reference's autograd, and timed
                                             # (`inplace: [x]` in it: the backward writes x's gradient into x)

   `entry` may also name a callable in another file (`launch/rope.py:rope`) or module
   (`pkg.ops.rope:rope`, or `pkg.ops.rope.rope`): `file` stays what the bot may rewrite, and the launcher imports
   it by its module name (its path below the manifest's folder or an import root).

Files are read as text and inspected with `ast`; nothing here imports user code (the worker does that,
in a child process). Everything a spec holds is plain data, so it crosses process boundaries as JSON.
"""

from __future__ import annotations

import ast
import hashlib
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot.config import reader
from kforge_bot.config.yamlcheck import did_you_mean
from kforge_bot.errors import KforgeError
from kforge_bot.spec.dependencies import NO_KERNEL_FOLDERS
from kforge_bot.spec.env import check_env

MANIFEST_NAME = "kforge.yaml"
LANGUAGES = ("triton", "cuda", "cpp", "c", "torch", "sycl")  # the one vocabulary: manifests and policies
LANGUAGE_ALIASES = {"pytorch": "torch"}  # old spellings, still accepted
TARGET_KINDS = ("cpu", "cuda", "xpu", "mps")  # the device kinds: the one list every module uses
DEFAULT_SEEDS = 3
# A kernel's name reaches branch names, log lines, annotations and PR text: letters, digits and ._- only, so
# that no name can carry a newline, a workflow command (`::error`) or Markdown.
MAX_MANIFEST_KERNELS = 256
# `workloads:` is read by kforge_bot.workloads.spec (programs that use the kernels, timed end to end).
TOP_KEYS = ("version", "kernels", "workloads")
MAX_SHAPE_SETS = 64


class ManifestOverCap(KforgeError):
    """A manifest naming more kernels than one may: never read as a repository without kernels."""


@dataclass(frozen=True)
class Implementation:
    """Source text plus the symbol to call. `root` goes on sys.path so the source's own imports resolve."""

    source: str
    symbol: str
    filename: str  # a label (and the file name the worker writes the source to)
    root: str | None = None
    # A kernel in a package: the dotted name the source is imported as (its launcher and its package import it so),
    # the module `symbol` lives in where that is another one (a launcher), and the import roots (absolute folders
    # put on sys.path: a src/ layout). Empty: the source is imported on its own, `symbol` in it.
    module: str = ""
    entry_module: str = ""
    paths: tuple[str, ...] = ()
    # False: the packages above `module` are made empty in the worker, their __init__.py never run (a package whose
    # __init__ pulls a whole training stack); the module and what it imports itself load as usual.
    package_init: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Implementation:
        data = dict(data)
        data["paths"] = tuple(data.get("paths") or ())
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
            source=read_source(path),
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
    # What a call of the kernel's entry gives back (evaluate.worker.calls): the returns selected (None: all of them),
    # the inputs it writes (positions, in the entry's call), and the inputs whose gradients are checked (empty: forward
    # only). `reference_returns`: "entry" where the reference is the kernel itself (the same selection and in-place
    # inputs apply to it), "outputs" where it is an oracle of its own, which returns the results, then the in-place
    # inputs' values, in the manifest's order.
    outputs: tuple[int | str, ...] | None = None
    inplace: tuple[int | str, ...] = ()
    grad_inputs: tuple[int | str, ...] = ()
    # Inputs (among grad_inputs) into whose own memory the backward writes their gradient (`backward.inplace`:
    # Liger's SwiGLU writes da into a): the gradient compared is what the buffer holds after the call.
    grad_inplace: tuple[int | str, ...] = ()
    # A backward launcher called with the forward's saved values ({"launcher", "args", "returns"}); empty: the
    # gradients come from autograd through the entry (an autograd.Function).
    backward_launcher: dict[str, Any] = field(default_factory=dict)
    reference_returns: str = "entry"
    # Keyword arguments every call of the entry (and of the reference) gets (`kwargs:`); a shape set's own `kwargs`
    # key adds to them for that set. A string "torch.<dtype>" stands for the dtype.
    call_kwargs: dict[str, Any] = field(default_factory=dict)
    backward_tolerance: dict[str, float] | None = None  # the gradients' (`tolerance.backward`); None: `tolerance`
    env: dict[str, str] = field(default_factory=dict)  # set in every worker before any import (`env:`)
    import_roots: tuple[str, ...] = ()  # relative to root, as the manifest says them
    entry_file: str = ""  # relative to root: where the entry lives, when not in kernel_file
    # GPU MODE problems (kforge_bot.spec.gpumode); the defaults are every other format's behaviour.
    timed_shapes: tuple[int, ...] | None = None  # the shape sets that are timed (None: all); the rest are checked only
    seed_kwarg: str | None = None  # the inputs callable's keyword that takes the harness's secret seed
    data_arg: bool = False  # the inputs are one object, passed whole (`custom_kernel(data)`)
    # An extra oracle in the inputs module (GPU MODE's reference.py holds generate_input and check_implementation): it
    # stays the problem's own where a caller swaps the reference (the gate judging a head against its base).
    oracle_symbol: str | None = None
    support: tuple[tuple[str, str], ...] = ()  # (file name, source): modules every implementation imports, beside it
    kernel: Implementation | None = None  # the kernel as written where it is neither (GPU MODE's submission.py)
    # Per size, the domain a kernel is honestly meant for (multiple_of, min, max, fixed): held-out variants keep to it.
    constraints: dict[str, dict[str, Any]] = field(default_factory=dict)

    def timed_indices(self) -> tuple[int, ...]:
        """The shape sets that are timed: every one, unless the format times a subset (GPU MODE's benchmarks)."""
        return tuple(range(len(self.shape_sets))) if self.timed_shapes is None else self.timed_shapes

    @property
    def kernel_path(self) -> Path:
        return Path(self.root) / self.kernel_file

    @property
    def source_roots(self) -> list[Path]:
        """Where the kernel's local imports resolve: its folder, then its import roots."""
        return [Path(self.root), *(Path(self.root) / r for r in self.import_roots)]

    def candidate_from_source(self, source: str, filename: str | None = None) -> Implementation:
        """A candidate for this kernel: new text for `kernel_file`, defining `entry` (or, where the entry lives in
        another file, imported under the kernel file's module name by that file). A KernelBench or GPU MODE
        candidate is its `entry` (ModelNew, custom_kernel), or the reference's symbol where it is the reference's
        own file edited (the tuner's edits of a problem with no ModelNew or submission.py)."""
        symbol = self.baseline.symbol
        if self.format in ("kernelbench", "gpumode"):
            symbol = entry_or_written(source, self.entry, self.baseline.symbol)
        return replace(self.baseline, source=source, symbol=symbol, filename=filename or Path(self.kernel_file).name)

    def with_baseline(self, baseline: Implementation) -> KernelSpec:
        return replace(self, baseline=baseline)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shape_sets"] = list(self.shape_sets)
        data["targets"] = list(self.targets)
        for key in ("inplace", "grad_inputs", "grad_inplace", "import_roots"):
            data[key] = list(data[key])
        data["outputs"] = None if self.outputs is None else list(self.outputs)
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
        for key in ("inplace", "grad_inputs", "grad_inplace", "import_roots"):
            data[key] = tuple(data.get(key) or ())
        data["outputs"] = None if data.get("outputs") is None else tuple(data["outputs"])
        if data.get("timed_shapes") is not None:
            data["timed_shapes"] = tuple(data["timed_shapes"])
        data["support"] = tuple((str(name), str(text)) for name, text in data.get("support") or ())
        return cls(**data)


# --------------------------------------------------------------------------------------------- helpers


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


def entry_or_written(source: str, entry: str, written: str) -> str:
    """Which symbol of a source is the kernel where a candidate's name (`entry`: ModelNew, custom_kernel) differs
    from the problem's (`written`: Model, ref_kernel): `written` where the source defines only that (the problem's
    own file), else `entry`, so that a source that does not parse or lacks it is judged by its own error."""
    return written if not defines(source, entry) and defines(source, written) else entry


def kernelbench_class(source: str) -> str:
    """Which class of a KernelBench source is the kernel: ModelNew where it defines one, else Model."""
    return entry_or_written(source, "ModelNew", "Model")


def kernel_implementation(spec: KernelSpec) -> Implementation:
    """The code a kernel is, as written: the manifest's entry, or a KernelBench file's ModelNew (Model when
    the file has no ModelNew), or a GPU MODE problem's submission.py (its ref_kernel where it has none). The one
    place that decides which class of a KernelBench file is the kernel (by kernelbench_class)."""
    if spec.format == "kernelbench":
        # The baseline, not the reference: a head kernel judged under the base's test keeps its own file there.
        return replace(spec.baseline, symbol=kernelbench_class(spec.baseline.source))
    return spec.kernel or spec.baseline


def has_own_reference(spec: KernelSpec) -> bool:
    """Whether the spec names an oracle other than the kernel itself."""
    if spec.format == "kernelbench":
        return defines(spec.baseline.source, "ModelNew")
    if spec.format == "gpumode":
        return True  # ref_kernel, whatever submission.py holds
    return spec.reference != spec.baseline


# ---------------------------------------------------------------------------------------- KernelBench


def load_kernelbench(path: str | Path) -> KernelSpec:
    path = Path(path).resolve()
    source = read_source(path)
    names = top_level_names(parse_python(path, source))
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
        language=guess_language(source),
    )


def candidate_language(spec: KernelSpec, candidate: Implementation) -> str:
    """The language a candidate is written in: a manifest kernel's is declared (its candidates are versions of
    the same file); a KernelBench candidate's is read from its source (Triton, CUDA through load_inline, ...)."""
    return spec.language if spec.format == "manifest" else guess_language(candidate.source)


def guess_language(source: str) -> str:
    """The language a Python kernel is written in, read from its source: Triton, CUDA (load_inline), SYCL or torch."""
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


def check_kernel_name(name: Any, manifest: Path) -> str:
    """A manifest's kernel name, or a one-line error that quotes it escaped (it may hold a newline)."""
    if not isinstance(name, str) or not reader.is_safe_name(name):
        shown = ascii(name) if len(ascii(name)) <= 40 else ascii(name)[:37] + "..."
        raise KforgeError(f"kernels: kernel name {shown} is not allowed", path=manifest,
                          hint="use letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit)")
    return name


def inside(rel: Any, root: Path, boundary: Path, key: str, manifest: Path) -> Path:
    """`rel` (a path a manifest names, relative to `root`) resolved, symlinks included, and checked to lie inside
    `boundary` (the checkout): the bot reads these files on the host, outside any sandbox."""
    text = str(rel)
    if not text.isprintable():  # a NUL or a newline is no file name a manifest should hold
        raise KforgeError(f"{key}: {ascii(text)} is not a file name in the checkout", path=manifest,
                          hint="write the path out plainly")
    if not text or text.startswith(("/", "~", "\\")) or Path(text).is_absolute():
        raise KforgeError(f"{key}: {ascii(text)} must be a path relative to the manifest, inside the checkout",
                          path=manifest, hint="remove the leading '/' or '~'")
    resolved = reader.real_path(root / text)
    if not resolved.is_relative_to(reader.real_path(boundary)):
        raise KforgeError(f"{key}: {ascii(text)} resolves outside the checkout (a '..' or a symbolic link)",
                          path=manifest, hint="keep kernels, references and inputs inside the repository")
    return resolved


def file_reference(value: str) -> tuple[str, str] | None:
    """(file, symbol) of a 'path/to/file.py:symbol' reference (a manifest's reference, inputs or entry), or None
    where `value` is not one."""
    file_part, sep, symbol = value.rpartition(":")
    if sep and file_part.endswith(".py") and symbol.isidentifier():
        return file_part, symbol
    return None


def _ref(value: Any, key: str, path: Path, default_file: str) -> tuple[str, str]:
    """Parse 'file.py:callable' (or a bare 'callable' in `default_file`)."""
    if not isinstance(value, str) or not value.strip():
        raise KforgeError(f"{key}: expected 'path/to/file.py:callable', got {value!r}", path=path)
    if ":" not in value:
        return default_file, value.strip()
    found = file_reference(value)
    if found is None:
        raise KforgeError(f"{key}: expected 'path/to/file.py:callable', got {value!r}", path=path)
    return found


def _implementation(root: Path, rel: str, symbol: str, key: str, manifest: Path, boundary: Path,
                    file_key: str | None = None, paths: tuple[str, ...] = ()) -> Implementation:
    file_path = inside(rel, root, boundary, file_key or key, manifest)
    if not file_path.is_file():
        raise KforgeError(f"{file_key or key}: file {rel!r} does not exist", path=manifest,
                          hint="paths are relative to the manifest's directory")
    source = read_source(file_path, boundary)
    if not defines(source, symbol):
        parse_python(file_path, source)  # a syntax error is the better message
        raise KforgeError(f"{key}: {rel} defines no top-level {symbol!r}", path=manifest)
    return Implementation(source=source, symbol=symbol, filename=file_path.name, root=str(root), paths=paths)


_KERNEL_KEYS = {"file", "entry", "reference", "inputs", "shapes", "init", "tolerance", "targets", "language", "seeds",
                "import_roots", "outputs", "inplace", "backward", "constraints", "kwargs", "env",
                "package_init"}
CONSTRAINT_KEYS = ("multiple_of", "min", "max", "fixed")


def _kwargs(value: Any, where: str, manifest: Path) -> dict[str, Any]:
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


def _tolerances(value: Any, where: str, manifest: Path) -> tuple[dict[str, float] | None, dict[str, float] | None]:
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


def _import_roots(value: Any, where: str, root: Path, manifest: Path, boundary: Path) -> tuple[str, ...]:
    """`import_roots:` folders (relative to the manifest's) that go on sys.path: a src/ layout's `src`."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise KforgeError(f"{where}.import_roots: expected a list of folders, got {value!r}", path=manifest,
                          hint="e.g. import_roots: [src], relative to the manifest's directory")
    for folder in value:
        if Path(folder).is_absolute() or not inside(folder, root, boundary, f"{where}.import_roots", manifest).is_dir():
            raise KforgeError(f"{where}.import_roots: {folder!r} is not a folder below the manifest's directory",
                              path=manifest, hint="give folders relative to the manifest's directory, e.g. [src]")
    return tuple(str(Path(v)) for v in value)


def module_name(rel: str, roots: list[Path], root: Path) -> str | None:
    """The dotted name a file is imported as: its path below the first of `roots` (the import roots, then the
    manifest's folder) that holds it; None where none does, or where a part is not an identifier."""
    path = reader.real_path(root / rel)
    for folder in roots:
        folder = reader.real_path(folder)
        if path.is_relative_to(folder):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts.pop()
            if parts and all(p.isidentifier() for p in parts):
                return ".".join(parts)
    return None


def _module_file(module: str, roots: list[Path], root: Path, boundary: Path) -> str | None:
    """The file (relative to the manifest's folder) a dotted module name resolves to under the import roots."""
    for folder in roots:
        base = reader.real_path(folder).joinpath(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file() and reader.real_path(candidate).is_relative_to(reader.real_path(boundary)):
                return os.path.relpath(reader.real_path(candidate), reader.real_path(root))
    return None


def _entry(value: Any, where: str, kernel_file: str, roots: list[Path], root: Path,
           manifest: Path, boundary: Path) -> tuple[str, str]:
    """(file relative to the manifest's folder, symbol) the entry names: a bare name in `file`, a
    `path/to/launcher.py:fn`, or a module's callable (`pkg.mod:fn` or `pkg.mod.fn`)."""
    if not isinstance(value, str) or not value.strip():
        raise KforgeError(f"{where}.entry: expected a callable's name, got {value!r}", path=manifest)
    value = value.strip()
    if value.isidentifier():
        return kernel_file, value
    found = file_reference(value)
    if found is not None:
        return found
    module, sep, symbol = value.rpartition(":")
    if not sep:
        module, symbol = value.rpartition(".")[::2]
    if not module or not symbol.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
        raise KforgeError(f"{where}.entry: expected a name in `file`, 'path/to/launcher.py:fn' or 'pkg.module:fn', "
                          f"got {value!r}", path=manifest)
    found = _module_file(module, roots, root, boundary)
    if found is None:
        raise KforgeError(f"{where}.entry: module {module!r} is no file below the manifest's folder or its "
                          "import_roots", path=manifest,
                          hint="add the folder that holds the package to import_roots (e.g. [src])")
    return found, symbol


def _selection(value: Any, key: str, where: str, manifest: Path, allow_empty: bool) -> tuple[int | str, ...]:
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


def _positions(items: tuple[int | str, ...], names: list[str] | None, key: str, where: str,
               manifest: Path) -> tuple[int | str, ...]:
    """Names of the entry's parameters as positions (an oracle of its own may name its parameters otherwise);
    left as names where the entry's parameters cannot be read here (its worker resolves them)."""
    if names is None:
        return items
    unknown = [i for i in items if isinstance(i, str) and i not in names]
    if unknown:
        raise KforgeError(f"{where}.{key}: the entry has no parameter {unknown[0]!r} (has: {', '.join(names)})",
                          path=manifest)
    return tuple(names.index(i) if isinstance(i, str) else i for i in items)


def _backward(value: Any, where: str, manifest: Path) -> tuple[tuple[int | str, ...], tuple[int | str, ...],
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
    inputs = _selection(value["inputs"], "backward.inputs", where, manifest, allow_empty=False)
    written = () if value.get("inplace") is None else \
        _selection(value["inplace"], "backward.inplace", where, manifest, allow_empty=True)
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
        _selection(value["returns"], "backward.returns", where, manifest, allow_empty=False)
    return inputs, written, {"launcher": launcher, "args": list(args),
                             "returns": None if returns is None else list(returns)}


def _manifest_kernel(name: str, entry: Any, root: Path, manifest: Path, boundary: Path | None = None) -> KernelSpec:
    check_kernel_name(name, manifest)
    boundary = root if boundary is None else boundary
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
    import_roots = _import_roots(entry.get("import_roots"), where, root, manifest, boundary)
    roots = [root / r for r in import_roots] + [root]
    paths = tuple(str((root / r).resolve()) for r in import_roots)
    entry_file, symbol = _entry(entry["entry"], where, kernel_file, roots, root, manifest, boundary)
    kernel_path = inside(kernel_file, root, boundary, f"{where}.file", manifest)
    if not kernel_path.is_file():
        raise KforgeError(f"{where}.file: file {kernel_file!r} does not exist", path=manifest,
                          hint="paths are relative to the manifest's directory")
    elsewhere = os.path.normpath(entry_file) != os.path.normpath(kernel_file)
    launcher = _implementation(root, entry_file, symbol, f"{where}.entry", manifest, boundary,
                               file_key=f"{where}.file", paths=paths)
    kernel = launcher
    if elsewhere or import_roots:
        # The kernel is imported as a module of its package (a launcher, or the package itself, imports it by name).
        module = module_name(kernel_file, roots, root)
        entry_module = module_name(entry_file, roots, root)
        if module is None or entry_module is None:
            raise KforgeError(f"{where}: {kernel_file if module is None else entry_file} has no module name below "
                              "the manifest's folder or its import_roots", path=manifest,
                              hint="every folder on the way must be a Python identifier")
        source = read_source(kernel_path, boundary)
        kernel = Implementation(source=source, symbol=symbol, filename=Path(kernel_file).name, root=str(root),
                                module=module, entry_module="" if entry_module == module else entry_module,
                                paths=paths)

    package_init = entry.get("package_init", True)
    if not isinstance(package_init, bool):
        raise KforgeError(f"{where}.package_init: expected true or false, got {package_init!r}", path=manifest)
    if not package_init and not (elsewhere or import_roots):
        raise KforgeError(f"{where}.package_init: false needs a kernel in a package (import_roots, or an entry in a "
                          "module)", path=manifest)
    if not package_init:
        kernel = replace(kernel, package_init=False)
    if "reference" in entry:
        ref_file, ref_symbol = _ref(entry["reference"], f"{where}.reference", manifest, kernel_file)
        reference = _implementation(root, ref_file, ref_symbol, f"{where}.reference", manifest, boundary,
                                    paths=paths)
    else:
        reference = kernel
    inputs_file, inputs_symbol = _ref(entry["inputs"], f"{where}.inputs", manifest, kernel_file)
    inputs_source = _implementation(root, inputs_file, inputs_symbol, f"{where}.inputs", manifest, boundary,
                                    paths=paths)
    outputs = None if entry.get("outputs") is None else \
        _selection(entry["outputs"], "outputs", where, manifest, allow_empty=bool(entry.get("inplace")))
    inplace = () if entry.get("inplace") is None else \
        _selection(entry["inplace"], "inplace", where, manifest, allow_empty=True)
    grad_inputs, grad_inplace, backward_launcher = _backward(entry.get("backward"), where, manifest)
    names = entry_parameters(launcher.source, symbol)
    grad_inputs = _positions(grad_inputs, names, "backward.inputs", where, manifest)
    grad_inplace = _positions(grad_inplace, names, "backward.inplace", where, manifest)
    inplace = _positions(inplace, names, "inplace", where, manifest)
    # Names unresolved here (an imported entry) against indices are the worker's to compare (calls.EntryCall).
    decidable = names is not None or len({type(i) for i in (*grad_inputs, *grad_inplace)}) <= 1
    stray = [i for i in grad_inplace if i not in grad_inputs] if decidable else []
    if stray:
        raise KforgeError(f"{where}.backward.inplace: {stray[0]!r} is not in backward.inputs (a backward writes an "
                          "input's own gradient into it)", path=manifest,
                          hint=f"add {stray[0]!r} to backward.inputs, or drop it from backward.inplace")
    both = [i for i in grad_inplace if i in inplace]
    if both:
        raise KforgeError(f"{where}.backward.inplace: input {both[0]!r} is also in inplace: a buffer written by both "
                          "the forward and the backward cannot be checked as either", path=manifest,
                          hint="declare it in one of them")

    shapes = entry.get("shapes", [{}])
    if not isinstance(shapes, list) or not shapes or not all(isinstance(s, dict) for s in shapes):
        raise KforgeError(f"{where}.shapes: expected a non-empty list of mappings (keyword arguments for "
                          f"the inputs callable)", path=manifest)
    if len(shapes) > MAX_SHAPE_SETS:
        raise KforgeError(f"{where}.shapes: {len(shapes)} shape sets, at most {MAX_SHAPE_SETS}", path=manifest)
    init = entry.get("init")
    init = {} if init is None else init  # `init:` with no value means none; `init: []` is a mistake
    if not isinstance(init, dict):
        raise KforgeError(f"{where}.init: expected a mapping of keyword arguments", path=manifest)
    tolerance, backward_tolerance = _tolerances(entry.get("tolerance"), where, manifest)
    call_kwargs = _kwargs(entry.get("kwargs"), f"{where}.kwargs", manifest)
    for i, shape in enumerate(shapes):
        if "kwargs" in shape:
            _kwargs(shape["kwargs"], f"{where}.shapes[{i}].kwargs", manifest)
    env = check_env(entry.get("env"), where, manifest,
                    {m.split(".")[0] for m in (kernel.module, kernel.entry_module) if m})
    targets = entry.get("targets", list(TARGET_KINDS))
    if not isinstance(targets, list) or not targets or any(t not in TARGET_KINDS for t in targets):
        raise KforgeError(f"{where}.targets: expected a list drawn from {', '.join(TARGET_KINDS)}, got {targets!r}",
                          path=manifest)
    language = LANGUAGE_ALIASES.get(entry.get("language", "torch"), entry.get("language", "torch"))
    if language not in LANGUAGES:
        raise KforgeError(f"{where}.language: expected one of {', '.join(LANGUAGES)}, got {language!r}",
                          path=manifest)
    constraints = _constraints(entry.get("constraints"), shapes, where, manifest)
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
        outputs=outputs,
        inplace=inplace,
        grad_inputs=grad_inputs,
        grad_inplace=grad_inplace,
        backward_launcher=backward_launcher,
        reference_returns="outputs" if "reference" in entry else "entry",
        call_kwargs=call_kwargs,
        backward_tolerance=backward_tolerance,
        env=env,
        import_roots=import_roots,
        entry_file=str(Path(entry_file)) if elsewhere else "",
        constraints=constraints,
    )


def _constraints(value: Any, shapes: list[dict[str, Any]], where: str, manifest: Path) -> dict[str, dict[str, Any]]:
    """`constraints: {n: {multiple_of: 256, min: 256, max: 65536}, batch: {fixed: true}}`: the domain a kernel is
    honestly meant for, per size (held-out variants keep to it, kforge_bot.evaluate.wire.heldout). Every listed shape
    set must lie in it."""
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


def load_manifest_entry(manifest: str | Path, name: str, entry: Any, boundary: Path | None = None) -> KernelSpec:
    """One kernel of a manifest from its raw `kernels.<name>` entry, validated on its own: a caller
    that must keep a manifest's good kernels when another one is broken (the regression gate) loads
    each entry with this, where `load_manifest` stops at the first error. Its files must lie inside
    `boundary` (default: the manifest's folder)."""
    path = Path(manifest).resolve()
    return _manifest_kernel(name, entry, path.parent, path, boundary)


def read_manifest(path: str | Path, boundary: str | Path | None = None) -> dict[str, Any]:
    """A kforge.yaml's parsed data, its shape checked (the `kernels:` mapping, its size, its names); its entries
    are checked one by one by `load_manifest_entry`. With `boundary` (a checkout), a manifest that resolves outside
    it (a committed link) is refused unread."""
    data = reader.read_yaml(path, boundary)
    path = Path(path).resolve()
    if not isinstance(data, dict) or not isinstance(data.get("kernels"), dict) or not data["kernels"]:
        raise KforgeError("expected a top-level 'kernels:' mapping of kernel names to settings", path=path,
                          hint="see kforge-bot's docs/manifest.md")
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise KforgeError(f"unknown top-level key {unknown[0]!r}", path=path,
                          hint=f"{did_you_mean(unknown[0], TOP_KEYS)}allowed: {', '.join(TOP_KEYS)}")
    if data.get("version", 1) != 1:
        raise KforgeError(f"version: unsupported manifest version {data['version']!r}", path=path,
                          hint="this kforge-bot reads version 1")
    if len(data["kernels"]) > MAX_MANIFEST_KERNELS:
        raise ManifestOverCap(f"kernels: {len(data['kernels'])} kernels, over the cap of {MAX_MANIFEST_KERNELS} in one "
                              "manifest", path=path, hint="split them over manifests in subfolders")
    for name in data["kernels"]:
        check_kernel_name(name, path)
    return data


def load_manifest(path: str | Path, boundary: Path | None = None) -> dict[str, KernelSpec]:
    """All kernels of one kforge.yaml, by name; their files must lie inside `boundary` (default: its folder)."""
    path = Path(path).resolve()
    data = read_manifest(path)
    return {name: _manifest_kernel(name, entry, path.parent, path, boundary) for name, entry in data["kernels"].items()}


# ------------------------------------------------------------------------------------------ entry points


def load_spec(path: str | Path, kernel: str | None = None) -> KernelSpec:
    """A spec from a KernelBench file, a kforge.yaml (with `kernel`), a kernel file a manifest names, or a GPU MODE
    problem (its folder or its task.yml)."""
    from kforge_bot.spec import gpumode  # the GPU MODE layout's own module (it builds on this one)

    path = Path(path)
    if gpumode.is_gpumode_problem(path) and (path.is_dir() or path.name == gpumode.TASK_NAME):
        return _only_kernel(gpumode.load_gpumode(path), kernel, "a GPU MODE problem")
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
    source = read_source(path)
    parse_python(path, source)
    if is_kernelbench_source(source):
        return _only_kernel(load_kernelbench(path), kernel, "a KernelBench problem")
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


def _only_kernel(spec: KernelSpec, kernel: str | None, what: str) -> KernelSpec:
    """A file or folder that is one kernel: `--kernel` may only name it, never be silently ignored."""
    if kernel is not None and kernel != spec.name:
        raise KforgeError(f"--kernel {kernel!r}: this is {what}, one kernel named {spec.name!r}", path=spec.kernel_path,
                          hint="drop --kernel (it chooses among a kforge.yaml's kernels)")
    return spec


def discover_kernels(root: str | Path) -> list[KernelSpec]:
    """Every managed kernel under `root`: the manifest's kernels and KernelBench problem files."""
    root = Path(root).resolve()
    specs: list[KernelSpec] = []
    manifest = root / MANIFEST_NAME
    if manifest.is_file():
        specs.extend(load_manifest(manifest).values())
    for file in sorted(root.rglob("*.py")):
        if NO_KERNEL_FOLDERS.intersection(file.relative_to(root).parts):
            continue
        try:
            source = reader.read_text(file, root)
        except KforgeError:
            continue  # outside the checkout, not a regular file, too large or not text: no kernel
        if is_kernelbench_source(source):
            specs.append(load_kernelbench(file))
    return specs
