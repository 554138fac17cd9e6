"""The managed kernels of a repository checkout: every kforge.yaml entry, every KernelBench file and every GPU
MODE problem folder (task.yml beside reference.py), each loaded through kforge_bot.kernelspec (a kernel that does not
load is kept, with its error).

The gate, the PR bot, `check --all`, `list` and the pre-commit hook all find kernels here.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_bot.config import reader
from kforge_bot.config.policy import Policy
from kforge_bot.config.reader import is_safe_path, real_path
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import (
    MANIFEST_NAME,
    KernelSpec,
    ManifestOverCap,
    file_reference,
    find_manifest,
    is_kernelbench_source,
    load_kernelbench,
    load_manifest,
    load_manifest_entry,
    read_manifest,
)
from kforge_bot.kernelspec.dependencies import NO_KERNEL_FOLDERS
from kforge_bot.kernelspec.gpumode import REFERENCE, SUBMISSION, TASK_NAME, is_gpumode_problem, load_gpumode

# A KernelBench file's path, a manifest's and a GPU MODE problem folder's are kernel ids and names: they reach
# logs, annotations and PR text, so they are held to the reader's safe paths (the characters a kernel name may use,
# and '/').


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
        dirs[:] = sorted(d for d in dirs if d not in NO_KERNEL_FOLDERS and not d.startswith(".kforge"))
        for name in sorted(files):
            yield Path(folder) / name


def _file_part(value: Any, default: str) -> str:
    found = file_reference(value) if isinstance(value, str) else None
    return found[0] if found else default


def _with_entry_file(sources: tuple[str, ...], spec: KernelSpec, prefix: str) -> tuple[str, ...]:
    """The launcher the entry lives in, where that is not the kernel's file: a change to it changes the kernel."""
    if not spec.entry_file:
        return sources
    return tuple(dict.fromkeys((*sources, os.path.normpath(prefix + spec.entry_file))))


def _manifest_kernels(manifest: Path, checkout: Path, strict: bool, notes: list[str]) -> list[Kernel]:
    rel_dir = manifest.parent.relative_to(checkout).as_posix()
    prefix = "" if rel_dir == "." else f"{rel_dir}/"

    def ident(name: str) -> str:
        return f"{prefix}{name}"

    try:
        entries = read_manifest(manifest, checkout)["kernels"]
    except KforgeError as exc:
        if strict or isinstance(exc, ManifestOverCap):
            raise  # the problem is the manifest as a whole (an over-cap one is never an empty repository)
        notes.append(f"{prefix}{MANIFEST_NAME} does not load at this revision ({exc}); its kernels count as absent")
        return []
    kernels: list[Kernel] = []
    for name, entry in entries.items():
        entry_map = entry if isinstance(entry, dict) else {}
        declared = entry_map.get("file")
        kernel_file: str = declared if isinstance(declared, str) else MANIFEST_NAME
        named = (kernel_file, _file_part(entry_map.get("reference"), kernel_file),
                 _file_part(entry_map.get("inputs"), kernel_file))
        # Only files inside the checkout count as its sources (a path that leaves it is the entry's error).
        sources = tuple(dict.fromkeys(os.path.normpath(prefix + f) for f in named if _within(checkout, prefix + f)))
        rel_file = os.path.normpath(prefix + kernel_file)
        manifest_rel = prefix + MANIFEST_NAME
        try:
            spec = load_manifest_entry(manifest, name, entry, boundary=checkout)
        except KforgeError as exc:
            kernels.append(Kernel(ident(name), name, "manifest", rel_file, None, str(exc), sources, manifest_rel))
        else:
            kernels.append(Kernel(ident(name), name, "manifest", rel_file, spec, None,
                                  _with_entry_file(sources, spec, prefix), manifest_rel))
    return kernels


def _within(checkout: Path, rel: str) -> bool:
    if rel.startswith(("/", "~")) or not rel.isprintable():
        return False
    return real_path(checkout / rel).is_relative_to(checkout)


def discover(checkout: str | Path, policy: Policy, *, strict: bool = True, notes: list[str] | None = None,
             keep: Collection[str] = ()) -> dict[str, Kernel]:
    """Every managed kernel of a checkout, by id: the entries of each kforge.yaml (id = name, or
    `dir/name` for a manifest below the root) and each KernelBench file (id = its path), limited to
    the policy's kernel_paths, and the ids in `keep` wherever their file is (the base's kernels, when discovering a
    head: moving a kernel's file out of the kernel paths does not remove it from the gate). A kernel that does not
    load is kept, with its error. `strict`: a manifest that does not load at all raises (the head); otherwise it is
    noted and skipped (the base)."""
    checkout = Path(checkout).resolve()
    notes = notes if notes is not None else []
    found: dict[str, Kernel] = {}
    files = list(_walk(checkout))
    for manifest in (f for f in files if f.name == MANIFEST_NAME):
        rel = manifest.relative_to(checkout).as_posix()
        if not real_path(manifest).is_relative_to(checkout) or not is_safe_path(rel):
            message = f"{ascii(rel)[:60]}: a manifest must be a file inside the checkout, its path letters, digits and ._-/"
            if strict:
                raise KforgeError(message, hint="move or rename it")
            notes.append(message)
            continue
        for kernel in _manifest_kernels(manifest, checkout, strict, notes):
            found[kernel.id] = kernel
    for path in (f for f in files if f.suffix == ".py"):
        rel = path.relative_to(checkout).as_posix()
        if not real_path(path).is_relative_to(checkout):
            continue  # a symbolic link out of the checkout: never read on the host
        if not is_safe_path(rel):
            notes.append(f"skipped {ascii(rel)[:60]}: a kernel file's path may use letters, digits and ._-/ only")
            continue
        try:
            source = reader.read_text(path, checkout)
        except KforgeError:
            continue  # not a regular file, too large or not text: no KernelBench problem
        if not is_kernelbench_source(source):
            continue
        try:
            spec = load_kernelbench(path)
        except KforgeError as exc:
            found[rel] = Kernel(rel, path.stem, "kernelbench", rel, None, str(exc), (rel,))
        else:
            found[rel] = Kernel(rel, spec.name, "kernelbench", rel, spec, None, (rel,))
    for task in (f for f in files if f.name == TASK_NAME and is_gpumode_problem(f)):
        rel_dir = task.parent.relative_to(checkout).as_posix()
        if not is_safe_path(rel_dir):  # its name would render in the summary and the PR comment
            message = (f"skipped the GPU MODE problem {ascii(rel_dir)[:60]}: a problem folder's path may use "
                       "letters, digits and ._-/ only")
            if strict:
                raise KforgeError(message, hint="rename the folder")
            notes.append(message)
            continue
        rel = f"{rel_dir}/{SUBMISSION}" if rel_dir != "." else SUBMISSION
        sources = tuple(f"{rel_dir}/{n}" if rel_dir != "." else n for n in (SUBMISSION, REFERENCE, TASK_NAME))
        try:
            spec = load_gpumode(task.parent, checkout)
        except KforgeError as exc:
            found[rel_dir] = Kernel(rel_dir, task.parent.name, "gpumode", rel, None, str(exc), sources)
        else:
            found[rel_dir] = Kernel(rel_dir, spec.name, "gpumode", rel, spec, None, sources)
    return {k: v for k, v in found.items() if k in keep or policy.is_kernel_path(v.file)}


def sibling_references(spec: KernelSpec, file: Path, target: str) -> list[dict[str, Any]]:
    """Working implementations for other targets (KForge's cross-platform reference): kernels in the same
    kforge.yaml that are checked against the same reference callable and do not run on this target."""
    if spec.format != "manifest":
        return []
    manifest = file if file.suffix in (".yaml", ".yml") else find_manifest(file)
    if manifest is None:
        return []
    refs = []
    for other in load_manifest(manifest).values():
        if other.name == spec.name or other.kernel_file == spec.kernel_file or target in other.targets:
            continue
        if (other.reference.source, other.reference.symbol) != (spec.reference.source, spec.reference.symbol):
            continue
        refs.append({"target": ", ".join(other.targets), "language": other.language, "source": other.baseline.source,
                     "file": other.kernel_file,
                     "note": f"Kernel `{other.name}` ({other.kernel_file}) from the same kforge.yaml, checked there "
                             "against the same reference."})
    return refs
