"""The managed kernels of a repository checkout: every kforge.yaml entry, every KernelBench file and every GPU
MODE problem folder (task.yml beside reference.py), each loaded through kforge_bot.spec (a kernel that does not
load is kept, with its error).

The gate, the PR bot, `check --all`, `list` and the pre-commit hook all find kernels here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kforge_bot.cache import DEFAULT_DIR
from kforge_bot.errors import KforgeError
from kforge_bot.policy import Policy
from kforge_bot.spec import (
    MANIFEST_NAME,
    KernelSpec,
    is_kernelbench_source,
    load_kernelbench,
    load_manifest,
    load_manifest_entry,
)
from kforge_bot.spec_gpumode import REFERENCE, SUBMISSION, TASK_NAME, is_gpumode_problem, load_gpumode

SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", DEFAULT_DIR, "build", "dist",
                       ".tox", ".mypy_cache", ".pytest_cache"})


@dataclass
class Kernel:
    """A managed kernel as one revision has it (spec None when it does not load)."""

    id: str
    name: str
    format: str  # manifest | kernelbench | gpumode
    file: str  # repository-relative path of the kernel file
    spec: KernelSpec | None
    error: str | None = None
    sources: tuple[str, ...] = ()  # repository-relative: kernel, reference and inputs files
    manifest: str | None = None  # repository-relative kforge.yaml that names it


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".kforge"))
        for name in sorted(files):
            yield Path(folder) / name


def _file_part(value: Any, default: str) -> str:
    if isinstance(value, str) and ":" in value:
        return value.rpartition(":")[0] or default
    return default


def _manifest_kernels(manifest: Path, checkout: Path, strict: bool, notes: list[str]) -> list[Kernel]:
    rel_dir = manifest.parent.relative_to(checkout).as_posix()
    prefix = "" if rel_dir == "." else f"{rel_dir}/"

    def ident(name: str) -> str:
        return f"{prefix}{name}"

    try:
        specs: dict[str, KernelSpec] | None = load_manifest(manifest)
        whole: KforgeError | None = None
    except KforgeError as exc:
        specs, whole = None, exc
    try:
        raw = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        raw = None
    entries = raw.get("kernels") if isinstance(raw, dict) else None
    if not isinstance(entries, dict):
        if strict and whole is not None:
            raise whole
        if whole is not None:
            notes.append(f"{prefix}{MANIFEST_NAME} does not load at this revision ({whole}); its kernels count as absent")
        return []
    kernels: list[Kernel] = []
    for name, entry in entries.items():
        name = str(name)
        entry_map = entry if isinstance(entry, dict) else {}
        declared = entry_map.get("file")
        kernel_file: str = declared if isinstance(declared, str) else MANIFEST_NAME
        sources = tuple(dict.fromkeys(
            os.path.normpath(prefix + f) for f in (kernel_file, _file_part(entry_map.get("reference"), kernel_file),
                                                   _file_part(entry_map.get("inputs"), kernel_file))))
        rel_file = os.path.normpath(prefix + kernel_file)
        manifest_rel = prefix + MANIFEST_NAME
        if specs is not None:
            kernels.append(Kernel(ident(name), name, "manifest", rel_file, specs[name], None, sources, manifest_rel))
            continue
        try:
            spec = load_manifest_entry(manifest, name, entry)
        except KforgeError as exc:
            kernels.append(Kernel(ident(name), name, "manifest", rel_file, None, str(exc), sources, manifest_rel))
        else:
            kernels.append(Kernel(ident(name), name, "manifest", rel_file, spec, None, sources, manifest_rel))
    if all(k.error is None for k in kernels) and whole is not None:
        if strict:
            raise whole  # the problem is the manifest as a whole, not one kernel
        notes.append(f"{prefix}{MANIFEST_NAME} does not load at this revision ({whole}); its kernels count as absent")
        return []
    return kernels


def discover(checkout: str | Path, policy: Policy, *, strict: bool = True,
             notes: list[str] | None = None) -> dict[str, Kernel]:
    """Every managed kernel of a checkout, by id: the entries of each kforge.yaml (id = name, or
    `dir/name` for a manifest below the root) and each KernelBench file (id = its path), limited to
    the policy's kernel_paths. A kernel that does not load is kept, with its error. `strict`: a
    manifest that does not load at all raises (the head); otherwise it is noted and skipped (the base)."""
    checkout = Path(checkout).resolve()
    notes = notes if notes is not None else []
    found: dict[str, Kernel] = {}
    files = list(_walk(checkout))
    for manifest in (f for f in files if f.name == MANIFEST_NAME):
        for kernel in _manifest_kernels(manifest, checkout, strict, notes):
            found[kernel.id] = kernel
    for path in (f for f in files if f.suffix == ".py"):
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not is_kernelbench_source(source):
            continue
        rel = path.relative_to(checkout).as_posix()
        try:
            spec = load_kernelbench(path)
        except KforgeError as exc:
            found[rel] = Kernel(rel, path.stem, "kernelbench", rel, None, str(exc), (rel,))
        else:
            found[rel] = Kernel(rel, spec.name, "kernelbench", rel, spec, None, (rel,))
    for task in (f for f in files if f.name == TASK_NAME and is_gpumode_problem(f)):
        rel_dir = task.parent.relative_to(checkout).as_posix()
        rel = f"{rel_dir}/{SUBMISSION}" if rel_dir != "." else SUBMISSION
        sources = tuple(f"{rel_dir}/{n}" if rel_dir != "." else n for n in (SUBMISSION, REFERENCE, TASK_NAME))
        try:
            spec = load_gpumode(task.parent)
        except KforgeError as exc:
            found[rel_dir] = Kernel(rel_dir, task.parent.name, "gpumode", rel, None, str(exc), sources)
        else:
            found[rel_dir] = Kernel(rel_dir, spec.name, "gpumode", rel, spec, None, sources)
    return {k: v for k, v in found.items() if policy.is_kernel_path(v.file)}
