"""Kernel specs: the one room that knows how a repository describes its kernels.

Three formats, each in a module of its own (the types they all build are in `model`):

1. KernelBench files (`kernelbench`), found by themselves: a module with `class Model(nn.Module)`, `get_inputs()` and
   `get_init_inputs()`. Candidates define `class ModelNew` with the same constructor and forward.
2. A `kforge.yaml` manifest for kernels in ordinary code (`manifest`, its value fields in `manifest_fields`)::

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
           constraints: {cols: {multiple_of: 256}}  # the sizes held-out variants may take
           keep_values: [cos, sin]           # inputs whose values held-out variants leave as made

   `entry` may also name a callable in another file (`launch/rope.py:rope`) or module
   (`pkg.ops.rope:rope`, or `pkg.ops.rope.rope`): `file` stays what the bot may rewrite, and the launcher imports
   it by its module name (its path below the manifest's folder or an import root).
3. GPU MODE problems (`gpumode`): a folder with `task.yml`, `reference.py` (`ref_kernel`, `generate_input`,
   `check_implementation`) and `submission.py`, whose `custom_kernel` is the kernel.

Files are read as text and inspected with `ast`; nothing here imports user code (the worker does that,
in a child process). Everything a spec holds is plain data, so it crosses process boundaries as JSON.
"""

from __future__ import annotations

from pathlib import Path

from kforge_bot.config import reader
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import gpumode
from kforge_bot.kernelspec.dependencies import NO_KERNEL_FOLDERS
from kforge_bot.kernelspec.kernelbench import load_kernelbench
from kforge_bot.kernelspec.manifest import (check_kernel_name, file_reference, find_manifest, import_roots_field,
                                            inside, load_manifest, load_manifest_entry, module_name, read_manifest)
from kforge_bot.kernelspec.manifest_fields import BACKWARD_ARG_KINDS, CONSTRAINT_KEYS, entry_parameters
from kforge_bot.kernelspec.model import (DEFAULT_SEEDS, KERNEL_LANGUAGES, LANGUAGE_ALIASES, MANIFEST_NAME,
                                         MAX_MANIFEST_KERNELS, MAX_SHAPE_SETS, TARGET_KINDS, TOP_KEYS, Implementation,
                                         KernelSpec, ManifestOverCap, candidate_language, has_own_reference,
                                         kernel_implementation)
from kforge_bot.kernelspec.source import (defines, entry_or_written, guess_language, is_kernelbench_source,
                                          kernelbench_class, parse_python, read_source, top_level_names)

__all__ = ["BACKWARD_ARG_KINDS", "CONSTRAINT_KEYS", "DEFAULT_SEEDS", "KERNEL_LANGUAGES", "LANGUAGE_ALIASES",
           "MANIFEST_NAME", "MAX_MANIFEST_KERNELS", "MAX_SHAPE_SETS", "TARGET_KINDS", "TOP_KEYS", "Implementation",
           "KernelSpec", "ManifestOverCap", "candidate_language", "check_kernel_name", "defines", "discover_kernels",
           "entry_or_written", "entry_parameters", "file_reference", "find_manifest", "guess_language",
           "has_own_reference", "import_roots_field", "inside", "is_kernelbench_source", "kernel_implementation",
           "kernelbench_class", "load_kernelbench", "load_manifest", "load_manifest_entry", "load_spec",
           "module_name", "parse_python", "read_manifest", "read_source", "top_level_names"]


def load_spec(path: str | Path, kernel: str | None = None) -> KernelSpec:
    """A spec from a KernelBench file, a kforge.yaml (with `kernel`), a kernel file a manifest names, or a GPU MODE
    problem (its folder or its task.yml)."""
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
