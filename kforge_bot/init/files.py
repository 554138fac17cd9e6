"""Which of a repository's Python files `kforge-bot init` reads, and which kernels its manifests already name."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from kforge_bot.config import reader
from kforge_bot.errors import KforgeError
from kforge_bot.init.scan.launchers import is_test_file
from kforge_bot.kernelspec import MANIFEST_NAME, file_reference
from kforge_bot.kernelspec.dependencies import NO_KERNEL_FOLDERS

# A library's scan also passes over folders that are environments by their usual names (never kernel sources).
SKIP_DIRS = NO_KERNEL_FOLDERS | {"env", "site-packages"}
# Folders that hold no library kernels (an application, docs, vendored third-party code): never parsed.
NOT_LIBRARY_DIRS = {"apps", "app", "docs", "doc", "third_party", "thirdparty", "3rdparty", "vendored", "_vendor",
                    "external", "extern", "deps", "notebooks", "website", "site"}
MAX_SCANNED_BYTES = 1 << 20  # a larger .py file is generated or data, not a kernel library's source


def already_managed(repo: Path) -> dict[str, dict[str, str]]:
    """Kernel files the repository's manifests already name, relative to the root -> {entry: manifest}. Only
    the `file` and `entry` keys are read, not through spec.load_manifest: a proposal written by `init --write`
    still holds its TODOs, does not load, and its entries must still count as managed."""
    found: dict[str, dict[str, str]] = {}
    for manifest in repo.rglob(MANIFEST_NAME):
        try:
            kernels = (reader.read_yaml(manifest, repo) or {}).get("kernels") or {}
        except (KforgeError, AttributeError):
            continue
        for entry in kernels.values() if isinstance(kernels, dict) else ():
            if isinstance(entry, dict) and isinstance(entry.get("file"), str):
                file, symbol = entry["file"], str(entry.get("entry"))
                launcher = file_reference(symbol)
                if launcher is not None:  # an entry in a launcher file of its own: that file is what it names
                    file, symbol = launcher
                path = (manifest.parent / file).resolve()
                if path.is_relative_to(repo):
                    found.setdefault(path.relative_to(repo).as_posix(), {})[symbol] = \
                        manifest.relative_to(repo).as_posix()
    return found


def python_files(repo: Path, scan: tuple[str, ...] = ()) -> Iterator[Path]:
    """The repository's Python files, less folders that hold no library (and, with `scan`, all but those folders
    and the tests), pruned as the walk goes: an application's tree is never entered."""
    for folder, dirs, files in os.walk(repo):
        rel = Path(folder).relative_to(repo).as_posix()
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and d.lower() not in NOT_LIBRARY_DIRS
                         and not d.startswith(".")
                         and (not scan or _on_the_way(f"{rel}/{d}".removeprefix("./"), scan)))
        inside = not scan or any(f"{rel}/".startswith(f"{s}/") or rel == s for s in scan) or \
            is_test_file(f"{rel}/x.py")
        for name in sorted(files):
            path = Path(folder) / name
            # Above a scanned folder, its packages' __init__.py: they name its modules and say what is exported.
            if not name.endswith(".py") or not (inside or name == "__init__.py"
                                                or is_test_file(path.relative_to(repo).as_posix())):
                continue
            try:
                if path.stat().st_size <= MAX_SCANNED_BYTES:
                    yield path
            except OSError:
                continue


_KERNEL_MARKERS = ("triton.jit", "@triton", "triton.autotune", "load_inline", "cpp_extension", "get_init_inputs")


def library_files(repo: Path, scan: tuple[str, ...] = ()) -> list[Path]:
    """python_files, less every top-level folder (tests aside) none of whose files holds a Triton kernel, a torch
    extension or a KernelBench problem (by its text): an application beside the library (a server, a UI's backend,
    which may well name triton in an install script) is read as text, never parsed."""
    by_top: dict[str, list[Path]] = {}
    for path in python_files(repo, scan):
        parts = path.relative_to(repo).parts
        by_top.setdefault(parts[0] if len(parts) > 1 else "", []).append(path)
    kept: list[Path] = []
    for top, paths in by_top.items():
        if top and not is_test_file(f"{top}/x.py") and not any(_mentions_kernels(p) for p in paths):
            continue
        kept.extend(paths)
    return kept


def _mentions_kernels(path: Path) -> bool:
    try:
        text = reader.read_text(path)
    except (KforgeError, OSError):
        return False
    return any(marker in text for marker in _KERNEL_MARKERS)


def _on_the_way(rel: str, scan: tuple[str, ...]) -> bool:
    """Whether the walk must enter `rel`: a scanned folder, one above it, one below it, or a tests folder."""
    return any(rel == s or s.startswith(f"{rel}/") or rel.startswith(f"{s}/") for s in scan) or \
        is_test_file(f"{rel}/x.py")

