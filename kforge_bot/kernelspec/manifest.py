"""kforge.yaml manifests: kernels in ordinary code, each named with its file, entry, reference, inputs and
settings. Every path a manifest names is resolved (links included) and held inside the checkout: the bot reads
these files on the host, outside any sandbox."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kforge_bot.config import reader
from kforge_bot.config.yamlcheck import did_you_mean
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec.env import check_env
from kforge_bot.kernelspec.manifest_fields import (backward_field, constraints_field, entry_parameters, kwargs_field,
                                                   positions, selection, tolerances_field)
from kforge_bot.kernelspec.model import (DEFAULT_SEEDS, KERNEL_LANGUAGES, LANGUAGE_ALIASES, MANIFEST_NAME,
                                         MAX_MANIFEST_KERNELS, MAX_SHAPE_SETS, TARGET_KINDS, TOP_KEYS, Implementation,
                                         KernelSpec, ManifestOverCap)
from kforge_bot.kernelspec.source import defines, parse_python, read_source


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
                "package_init", "keep_values"}


def import_roots_field(value: Any, where: str, root: Path, manifest: Path, boundary: Path) -> tuple[str, ...]:
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


@dataclass(frozen=True)
class _KernelCode:
    """Where a manifest kernel's code is: the file the bot may rewrite, the file and symbol the entry names, the
    import roots, and the implementations built from them (the launcher, and the kernel as the worker imports it)."""

    kernel_file: str
    entry_file: str
    symbol: str
    import_roots: tuple[str, ...]
    paths: tuple[str, ...]
    launcher: Implementation
    kernel: Implementation

    @property
    def elsewhere(self) -> bool:
        """Whether the entry lives in another file than the one the bot rewrites (a launcher)."""
        return os.path.normpath(self.entry_file) != os.path.normpath(self.kernel_file)


def _checked_keys(name: str, entry: Any, manifest: Path) -> str:
    """The entry's key path (`kernels.<name>`), once its name, its type, its keys and the required ones are checked."""
    check_kernel_name(name, manifest)
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
    return where


def _kernel_code(entry: dict[str, Any], where: str, root: Path, manifest: Path, boundary: Path) -> _KernelCode:
    """The kernel's files (`file`, `entry`, `import_roots`, `package_init`), read and checked."""
    kernel_file = entry["file"]
    if not isinstance(kernel_file, str) or not kernel_file.endswith(".py"):
        raise KforgeError(f"{where}.file: expected a path to a .py file, got {kernel_file!r}", path=manifest)
    import_roots = import_roots_field(entry.get("import_roots"), where, root, manifest, boundary)
    roots = [root / r for r in import_roots] + [root]
    paths = tuple(str((root / r).resolve()) for r in import_roots)
    entry_file, symbol = _entry(entry["entry"], where, kernel_file, roots, root, manifest, boundary)
    kernel_path = inside(kernel_file, root, boundary, f"{where}.file", manifest)
    if not kernel_path.is_file():
        raise KforgeError(f"{where}.file: file {kernel_file!r} does not exist", path=manifest,
                          hint="paths are relative to the manifest's directory")
    launcher = _implementation(root, entry_file, symbol, f"{where}.entry", manifest, boundary,
                               file_key=f"{where}.file", paths=paths)
    code = _KernelCode(kernel_file, entry_file, symbol, import_roots, paths, launcher, launcher)
    if code.elsewhere or import_roots:
        # The kernel is imported as a module of its package (a launcher, or the package itself, imports it by name).
        module = module_name(kernel_file, roots, root)
        entry_module = module_name(entry_file, roots, root)
        if module is None or entry_module is None:
            raise KforgeError(f"{where}: {kernel_file if module is None else entry_file} has no module name below "
                              "the manifest's folder or its import_roots", path=manifest,
                              hint="every folder on the way must be a Python identifier")
        kernel = Implementation(source=read_source(kernel_path, boundary), symbol=symbol,
                                filename=Path(kernel_file).name, root=str(root), module=module,
                                entry_module="" if entry_module == module else entry_module, paths=paths)
        code = replace(code, kernel=kernel)
    package_init = entry.get("package_init", True)
    if not isinstance(package_init, bool):
        raise KforgeError(f"{where}.package_init: expected true or false, got {package_init!r}", path=manifest)
    if not package_init and not (code.elsewhere or import_roots):
        raise KforgeError(f"{where}.package_init: false needs a kernel in a package (import_roots, or an entry in a "
                          "module)", path=manifest)
    return code if package_init else replace(code, kernel=replace(code.kernel, package_init=False))


def _call_fields(entry: dict[str, Any], where: str, code: _KernelCode, manifest: Path) -> dict[str, Any]:
    """What a call gives back and writes (`outputs`, `inplace`, `backward`), names resolved to the entry's
    parameter positions where its source shows them, as KernelSpec's fields."""
    outputs = None if entry.get("outputs") is None else \
        selection(entry["outputs"], "outputs", where, manifest, allow_empty=bool(entry.get("inplace")))
    inplace = () if entry.get("inplace") is None else \
        selection(entry["inplace"], "inplace", where, manifest, allow_empty=True)
    grad_inputs, grad_inplace, backward_launcher = backward_field(entry.get("backward"), where, manifest)
    names = entry_parameters(code.launcher.source, code.symbol)
    grad_inputs = positions(grad_inputs, names, "backward.inputs", where, manifest)
    grad_inplace = positions(grad_inplace, names, "backward.inplace", where, manifest)
    inplace = positions(inplace, names, "inplace", where, manifest)
    # Names unresolved here (an imported entry) against indices are the worker's to compare
    # (evaluate.worker.calls.EntryCall).
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
    return {"outputs": outputs, "inplace": inplace, "grad_inputs": grad_inputs, "grad_inplace": grad_inplace,
            "backward_launcher": backward_launcher, "keep_values": _keep_values(entry, names, where, manifest)}


def _keep_values(entry: dict[str, Any], names: list[str] | None, where: str, manifest: Path) -> tuple[int, ...]:
    """`keep_values: [cos, sin]`: inputs whose values held-out variants leave alone, as positions. Both workers
    apply them before either has imported the entry, so a name must resolve here, from the entry's source."""
    if entry.get("keep_values") is None:
        return ()
    kept = positions(selection(entry["keep_values"], "keep_values", where, manifest, allow_empty=True), names,
                     "keep_values", where, manifest)
    named = [k for k in kept if isinstance(k, str)]
    if named:
        raise KforgeError(f"{where}.keep_values: {named[0]!r} cannot be matched to a position: the entry is imported "
                          "where the manifest points, not defined there, so its parameters cannot be read",
                          path=manifest, hint="give the inputs' positions instead, e.g. keep_values: [1]")
    return tuple(int(k) for k in kept)


def _shape_fields(entry: dict[str, Any], where: str, manifest: Path) -> dict[str, Any]:
    """The shapes and what every call gets (`shapes`, `init`, `kwargs`, `constraints`), as KernelSpec's fields."""
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
    call_kwargs = kwargs_field(entry.get("kwargs"), f"{where}.kwargs", manifest)
    for i, shape in enumerate(shapes):
        if "kwargs" in shape:
            kwargs_field(shape["kwargs"], f"{where}.shapes[{i}].kwargs", manifest)
    return {"shape_sets": tuple(shapes), "init_kwargs": init, "call_kwargs": call_kwargs,
            "constraints": constraints_field(entry.get("constraints"), shapes, where, manifest)}


def _run_fields(entry: dict[str, Any], where: str, code: _KernelCode, manifest: Path) -> dict[str, Any]:
    """How the kernel is judged and run (`tolerance`, `env`, `targets`, `language`, `seeds`), as KernelSpec's
    fields."""
    tolerance, backward_tolerance = tolerances_field(entry.get("tolerance"), where, manifest)
    env = check_env(entry.get("env"), where, manifest,
                    {m.split(".")[0] for m in (code.kernel.module, code.kernel.entry_module) if m})
    targets = entry.get("targets", list(TARGET_KINDS))
    if not isinstance(targets, list) or not targets or any(t not in TARGET_KINDS for t in targets):
        raise KforgeError(f"{where}.targets: expected a list drawn from {', '.join(TARGET_KINDS)}, got {targets!r}",
                          path=manifest)
    language = LANGUAGE_ALIASES.get(entry.get("language", "torch"), entry.get("language", "torch"))
    if language not in KERNEL_LANGUAGES:
        raise KforgeError(f"{where}.language: expected one of {', '.join(KERNEL_LANGUAGES)}, got {language!r}",
                          path=manifest)
    seeds = entry.get("seeds", DEFAULT_SEEDS)
    if not isinstance(seeds, int) or isinstance(seeds, bool) or not 1 <= seeds <= 100:
        raise KforgeError(f"{where}.seeds: expected an integer from 1 to 100, got {seeds!r}", path=manifest)
    return {"tolerance": tolerance, "backward_tolerance": backward_tolerance, "env": env, "targets": tuple(targets),
            "language": language, "seeds": seeds}


def _manifest_kernel(name: str, entry: Any, root: Path, manifest: Path, boundary: Path | None = None) -> KernelSpec:
    """One `kernels.<name>` entry as a spec; checked in the order a reader would fix it: its keys, its code, its
    oracle and inputs, then the values (the call, the shapes, how it is judged)."""
    boundary = root if boundary is None else boundary
    where = _checked_keys(name, entry, manifest)
    code = _kernel_code(entry, where, root, manifest, boundary)
    reference = code.kernel
    if "reference" in entry:
        ref_file, ref_symbol = _ref(entry["reference"], f"{where}.reference", manifest, code.kernel_file)
        reference = _implementation(root, ref_file, ref_symbol, f"{where}.reference", manifest, boundary,
                                    paths=code.paths)
    inputs_file, inputs_symbol = _ref(entry["inputs"], f"{where}.inputs", manifest, code.kernel_file)
    inputs_source = _implementation(root, inputs_file, inputs_symbol, f"{where}.inputs", manifest, boundary,
                                    paths=code.paths)
    return KernelSpec(
        name=name, format="manifest", root=str(root), kernel_file=str(Path(code.kernel_file)), entry=code.symbol,
        reference=reference, baseline=code.kernel, inputs_symbol=inputs_symbol, inputs_source=inputs_source,
        reference_returns="outputs" if "reference" in entry else "entry", import_roots=code.import_roots,
        entry_file=str(Path(code.entry_file)) if code.elsewhere else "",
        **_call_fields(entry, where, code, manifest), **_shape_fields(entry, where, manifest),
        **_run_fields(entry, where, code, manifest))


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
