"""Importing an implementation in the worker: its source written under the worker's scratch and imported as a fresh
module named for its role, with its own copies of its repository's local modules (a base and a head may both say
`import helper` and mean different files), read from `.py` source only, and its torch extensions built where
compile-ahead finds them again (kforge_bot.scaleout.pool). Building its callable and its inputs is
kforge_bot.evaluate.worker.loading."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from kforge_bot.evaluate.worker import device_import
from kforge_bot.evaluate.worker.worker_io import short_error
from kforge_bot.kernelspec import Implementation


def import_implementation(impl: Implementation, workdir: Path, tag: str,
                          support: tuple[tuple[str, str], ...] = ()) -> ModuleType:
    """_import_implementation's module; where it fails asking for a GPU this machine lacks, NeedsDevice."""
    try:
        return _import_implementation(impl, workdir, tag, support)
    except Exception as exc:
        device_import.raise_if_needs_device(impl.module, impl.filename, exc, short_error(exc))
        raise


def _import_implementation(impl: Implementation, workdir: Path, tag: str,
                           support: tuple[tuple[str, str], ...] = ()) -> ModuleType:
    """Write the source to `workdir/<tag>_code/<filename>` and import it as a fresh module named for its role
    (each role is imported once in a worker). The spec's `support` modules (GPU MODE's task.py, utils.py) are
    written beside it and imported from there (by their names, once per process, as GPU MODE's evaluator does:
    torch.compile looks them up by name; the candidate's worker watches the baseline's helpers,
    snapshot.trusted_namespaces)."""
    digest = impl.digest
    extensions_root = os.environ.get("KFORGE_EXTENSIONS_ROOT")
    if extensions_root:
        # Compile-ahead (kforge_bot.scaleout.pool): each source builds its torch extensions in its own folder, so a
        # build made earlier in another process (same source, same import order) is found again, not redone.
        os.environ["TORCH_EXTENSIONS_DIR"] = _extensions_dir(Path(extensions_root) / digest, workdir)
    # Names and paths say the role alone, never which source: a kernel that could tell the base's from its own
    # (a digest in a module name, say) could tell a comparison from any other run and fail only there.
    folder = workdir / f"{tag}_code"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / impl.filename
    path.write_text(impl.source, encoding="utf-8")
    for name, text in support:
        (folder / name).write_text(text, encoding="utf-8")
    if impl.module:
        return _import_in_package(impl, path)
    module_name = f"_kforge_{tag}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {impl.filename}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    if not impl.root:
        spec.loader.exec_module(module)
        return module
    # Each implementation gets its own copies of its repository's local modules: a base and a head checkout
    # (or a candidate) may both say `import helper` and mean different files. Local modules another
    # implementation loaded are set aside during this import, and the ones this import loads are set aside
    # after it; every module keeps the objects it imported.
    root = Path(impl.root).resolve()
    _read_source_only(root)
    aside = {name: mod for name, mod in sys.modules.items() if _local_to_other_root(mod, root)}
    for name in aside:
        del sys.modules[name]
    before = set(sys.modules)
    sys.path.insert(0, str(root))
    if support:
        sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(root))
        if support:
            sys.path.remove(str(folder))
        if str(root) not in sys.path:
            sys.path.append(str(root))  # late imports inside kernels still resolve
        for name in set(sys.modules) - before:
            if _local_to(sys.modules[name], root):
                _LOCAL_ROOTS.add(root)
                del sys.modules[name]
        for name, mod in aside.items():
            sys.modules.setdefault(name, mod)
    return module


def import_as_written(impl: Implementation, workdir: Path, tag: str) -> ModuleType:
    """An implementation as its files have it (`list --import`): a module of a package is imported by its name from
    its import roots and stays imported, so the next kernel of the same library finds the package loaded (one import
    of the library per worker); anything else, or a package imported without its __init__, as import_implementation
    does. Never for a candidate: it serves no text but the files'."""
    if not impl.module or not impl.package_init:
        return import_implementation(impl, workdir, tag)
    roots = [Path(p).resolve() for p in impl.paths] + ([Path(impl.root).resolve()] if impl.root else [])
    for root in roots:
        _read_source_only(root)
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
    try:
        return importlib.import_module(impl.entry_module or impl.module)
    except Exception as exc:
        device_import.raise_if_needs_device(impl.module, impl.filename, exc, short_error(exc))
        raise


class _SourceAs(importlib.abc.MetaPathFinder):
    """Serves one module name from a given file: the implementation's text stands where its package has the
    kernel's file, for every importer (the launcher, the package's own __init__)."""

    def __init__(self, name: str, path: Path) -> None:
        self.name, self.path = name, path

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path,
                                                      loader=_SourceOnlyLoader(fullname, str(self.path)))


def _import_in_package(impl: Implementation, path: Path) -> ModuleType:
    """Import `impl` as module `impl.module` of its package, with its import roots and its folder on sys.path, and
    return the module its entry lives in (`impl.entry_module`, a launcher, or the kernel's own). Each
    implementation gets its own copies of the package's modules: they are taken out of sys.modules afterwards
    (every module keeps the objects it imported), so the next implementation imports them afresh with its text."""
    roots = [Path(p).resolve() for p in impl.paths] + ([Path(impl.root).resolve()] if impl.root else [])
    for root in roots:
        _read_source_only(root)
    finder = _SourceAs(impl.module, path)
    packaged = [impl.module, *([impl.entry_module] if impl.entry_module else [])]
    # Whatever an earlier implementation left (a package's parents, the kernel's module) is imported afresh.
    aside = {name: mod for name, mod in sys.modules.items()
             if any(name == m or name.startswith(m.split(".")[0] + ".") or name == m.split(".")[0] for m in packaged)
             or any(_local_to(mod, r) for r in roots) or _local_to_other_root(mod, roots[0] if roots else path)}
    for name in aside:
        del sys.modules[name]
    before = set(sys.modules)
    added = [str(r) for r in roots if str(r) not in sys.path]
    sys.path[:0] = added
    sys.meta_path.insert(0, finder)
    stubs = [] if impl.package_init else _empty_packages(packaged, roots)
    try:
        module = importlib.import_module(impl.entry_module or impl.module)
    finally:
        sys.meta_path.remove(finder)
        for name in stubs:
            sys.modules.pop(name, None)
        for name in set(sys.modules) - before:
            mod = sys.modules[name]
            if name in packaged or any(_local_to(mod, r) for r in roots) or _local_to(mod, path.parent):
                _LOCAL_ROOTS.update(roots)
                del sys.modules[name]
        for name, mod in aside.items():
            sys.modules.setdefault(name, mod)
    return module


def _empty_packages(modules: list[str], roots: list[Path]) -> list[str]:
    """The packages above `modules`, put in sys.modules as empty packages over their folders (`package_init:
    false`): their submodules import, their __init__.py never runs. Returns the names put there."""
    made: list[str] = []
    for dotted in modules:
        parts = dotted.split(".")
        for depth in range(1, len(parts)):
            name = ".".join(parts[:depth])
            if name in sys.modules:
                continue
            folders = [str(r.joinpath(*parts[:depth])) for r in roots if r.joinpath(*parts[:depth]).is_dir()]
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = folders
            package = importlib.util.module_from_spec(spec)
            sys.modules[name] = package
            if depth > 1:
                setattr(sys.modules[".".join(parts[:depth - 1])], parts[depth - 1], package)
            made.append(name)
    return made


def _extensions_dir(shared: Path, workdir: Path) -> str:
    """The shared build folder where this process may write it (unsandboxed); in the sandbox, where no process
    writes the shared folders, a private copy at the same path in every sandbox (KFORGE_EXTENSIONS_PRIVATE,
    see isolation.EXTENSIONS_MOUNT: ninja rebuilds a build moved to another path). A compile-ahead child
    builds its own source there and the bot publishes it; no process can plant a build that another source's
    import would load."""
    try:
        shared.mkdir(parents=True, exist_ok=True)
        if os.access(shared, os.W_OK):
            probe = shared / ".kforge-write-probe"
            probe.touch()
            probe.unlink()
            return str(shared)
    except OSError:
        pass  # read-only in this sandbox
    private = Path(os.environ.get("KFORGE_EXTENSIONS_PRIVATE") or workdir / "extensions") / shared.name
    if not private.exists():
        if shared.is_dir():
            shutil.copytree(shared, private, symlinks=True)
        private.mkdir(parents=True, exist_ok=True)
    return str(private)


_LOCAL_ROOTS: set[Path] = set()
_SOURCE_ONLY: set[str] = set()


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the source every time: never a repository's own `__pycache__` (a committed `.pyc` that need
    not match the source a reviewer read), and never writes one into the checkout."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


def _source_only_finder(entry: str) -> importlib.machinery.FileFinder:
    # An environment inside the repository (a checkout's .venv) keeps its installed bytecode: not local code.
    if not any(entry == root or entry.startswith(root + os.sep) for root in _SOURCE_ONLY) \
            or {"site-packages", "dist-packages"} & set(Path(entry).parts):
        raise ImportError("not an implementation's folder")  # the next hook's
    return importlib.machinery.FileFinder(entry, (_SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES),
                                          (importlib.machinery.ExtensionFileLoader,
                                           importlib.machinery.EXTENSION_SUFFIXES))


def _read_source_only(root: Path) -> None:
    """Modules under an implementation's root load from their `.py` source only: a sourceless `.pyc` is not a
    module there, and a cached one beside its source is not read."""
    if _source_only_finder not in sys.path_hooks:
        sys.path_hooks.insert(0, _source_only_finder)
    if str(root) not in _SOURCE_ONLY:
        _SOURCE_ONLY.add(str(root))
        for entry in [e for e in sys.path_importer_cache if e == str(root) or e.startswith(str(root) + os.sep)]:
            del sys.path_importer_cache[entry]  # a finder made before: made again by the hook


def _module_file(mod: object) -> Path | None:
    file = getattr(mod, "__file__", None)
    if not file:
        return None
    try:
        return Path(file).resolve()
    except (OSError, RuntimeError):
        return None


def _local_to(mod: object, root: Path) -> bool:
    file = _module_file(mod)
    return file is not None and file.is_relative_to(root)


def _local_to_other_root(mod: object, root: Path) -> bool:
    file = _module_file(mod)
    return file is not None and any(file.is_relative_to(r) for r in _LOCAL_ROOTS if r != root) \
        and not file.is_relative_to(root)
