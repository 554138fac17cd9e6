"""What a kernel spec holds: the implementations (source text and the symbol to call) and the kernel's settings,
all plain data that crosses process boundaries as JSON, with the few facts every format shares (which code is the
kernel as written, whether it has an oracle of its own, the language a candidate is written in)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec.source import defines, entry_or_written, guess_language, kernelbench_class, read_source

MANIFEST_NAME = "kforge.yaml"
KERNEL_LANGUAGES = ("triton", "cuda", "cpp", "c", "torch", "sycl")  # the one vocabulary: manifests and policies
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
    # GPU MODE problems (kforge_bot.kernelspec.gpumode); the defaults are every other format's behaviour.
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
    # Inputs (positions in the entry's call) whose values are a structure the kernel may rely on (RoPE's cos and
    # sin repeat each half): held-out variants and the changed-element checks leave them as the inputs callable made
    # them (`keep_values:`); their sizes still move.
    keep_values: tuple[int, ...] = ()

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
        for key in ("inplace", "grad_inputs", "grad_inplace", "import_roots", "keep_values"):
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
        for key in ("inplace", "grad_inputs", "grad_inplace", "import_roots", "keep_values"):
            data[key] = tuple(data.get(key) or ())
        data["outputs"] = None if data.get("outputs") is None else tuple(data["outputs"])
        if data.get("timed_shapes") is not None:
            data["timed_shapes"] = tuple(data["timed_shapes"])
        data["support"] = tuple((str(name), str(text)) for name, text in data.get("support") or ())
        return cls(**data)


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


def candidate_language(spec: KernelSpec, candidate: Implementation) -> str:
    """The language a candidate is written in: a manifest kernel's is declared (its candidates are versions of
    the same file); a KernelBench candidate's is read from its source (Triton, CUDA through load_inline, ...)."""
    return spec.language if spec.format == "manifest" else guess_language(candidate.source)
