"""`kforge-bot init [REPO]`: propose a kforge.yaml for an existing repository.

It reads (never imports) the repository's Python files and proposes an entry for each file that holds a
Triton kernel (`@triton.jit`) or a torch C++/CUDA extension (`load_inline`, `cpp_extension.load`), naming the
reference and input callables when the file already has them and marking what the user must write with TODO.
KernelBench problems need no entry (the gate and `list` find them) and are listed as comments.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click

from kforge_bot.commands import examples
from kforge_bot.errors import KforgeError
from kforge_bot.spec import MANIFEST_NAME, defines, is_kernelbench_source
from kforge_bot.yamlcheck import load_yaml_file

SKIP_DIRS = {".git", ".venv", "venv", "env", "node_modules", "build", "dist", "site-packages", "__pycache__",
             ".tox", ".mypy_cache", ".pytest_cache", ".kforge-cache"}
REFERENCE_NAMES = ("reference", "ref", "torch_reference", "reference_impl")
INPUT_NAMES = ("make_inputs", "get_inputs", "inputs")


@click.command("init", epilog=examples(
    "kforge-bot init                 # print a proposed kforge.yaml for this repository",
    "kforge-bot init ../repo --write # write it as ../repo/kforge.yaml (never over an existing one)"))
@click.argument("repo", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.option("--write", "write_file", is_flag=True, help="Write REPO/kforge.yaml instead of printing it.")
def init(repo: Path, write_file: bool) -> None:
    """Propose a kforge.yaml: an entry per Triton or torch-extension kernel file, with TODOs to fill in."""
    if not repo.is_dir():
        raise KforgeError("not a directory", path=repo, hint="give the repository's root")
    text, count = propose(repo.resolve())
    if not write_file:
        click.echo(text, nl=False)
        return
    if not count:
        raise KforgeError("no new kernel files to propose an entry for", path=repo,
                          hint="run `kforge-bot init` without --write to see what was found")
    target = repo / MANIFEST_NAME
    if target.exists():
        raise KforgeError("already exists; init never overwrites a manifest", path=target,
                          hint="run `kforge-bot init` without --write to see the proposal, and merge it by hand")
    target.write_text(text, encoding="utf-8")
    click.echo(f"wrote {target}: fill in the TODOs, then run `kforge-bot list` and `kforge-bot check --all`")


def propose(repo: Path) -> tuple[str, int]:
    """The proposed manifest's text (YAML with comments), and how many entries it proposes."""
    entries: list[str] = []
    notes: list[str] = []
    names: set[str] = set()
    managed = _already_managed(repo)
    for path in sorted(_python_files(repo)):
        rel = path.relative_to(repo).as_posix()
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue
        if is_kernelbench_source(source):
            notes.append(f"# {rel}: a KernelBench problem (Model, get_inputs): found without an entry")
            continue
        language = _language(source)
        if language is None:
            continue
        if rel in managed:
            notes.append(f"# {rel}: already in {managed[rel]}")
        elif defines(source, "ModelNew"):
            notes.append(f"# {rel}: a KernelBench candidate (ModelNew): `kforge-bot check PROBLEM --candidate {rel}`")
        else:
            entries.append(_entry(rel, path.stem, tree, language, names))
    head = ["# kforge.yaml proposed by `kforge-bot init`: fill in each TODO, then run `kforge-bot list` and",
            "# `kforge-bot check --all`. Keys: README.md, 'Describing kernels'.", "version: 1"]
    if not entries:
        head.append("# no new Triton or torch-extension kernel files to propose (KernelBench problems need no entry)")
    else:
        head.append("kernels:")
    return "\n".join(head + entries + notes) + "\n", len(entries)


def _already_managed(repo: Path) -> dict[str, str]:
    """Kernel files the repository's manifests already name, relative to the root -> the manifest. Only the
    `file` keys are read, not through spec.load_manifest: a proposal written by `init --write` still holds its
    TODOs, does not load, and its files must still count as managed."""
    found: dict[str, str] = {}
    for manifest in repo.rglob(MANIFEST_NAME):
        try:
            kernels = (load_yaml_file(manifest) or {}).get("kernels") or {}
        except (KforgeError, AttributeError):
            continue
        for entry in kernels.values() if isinstance(kernels, dict) else ():
            if isinstance(entry, dict) and isinstance(entry.get("file"), str):
                path = (manifest.parent / entry["file"]).resolve()
                if path.is_relative_to(repo):
                    found[path.relative_to(repo).as_posix()] = manifest.relative_to(repo).as_posix()
    return found


def _python_files(repo: Path):
    for path in repo.rglob("*.py"):
        if not any(part in SKIP_DIRS or part.startswith(".") for part in path.relative_to(repo).parts[:-1]):
            yield path


def _language(source: str) -> str | None:
    if re.search(r"@triton\.(jit|autotune)", source):
        return "triton"
    if "load_inline(" in source or re.search(r"cpp_extension\.load\(|from torch\.utils\.cpp_extension import", source):
        return "cuda" if ("__global__" in source or "cuda_sources" in source or ".cu" in source) else "cpp"
    return None


def _entry(rel: str, stem: str, tree: ast.Module, language: str, taken: set[str]) -> str:
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    kernels = [f.name for f in functions if any("triton" in ast.unparse(d) for d in f.decorator_list)]
    public = [f.name for f in functions if f.name not in kernels and not f.name.startswith("_")]
    reference = next((n for n in REFERENCE_NAMES if n in public), None)
    inputs = next((n for n in INPUT_NAMES if n in public), None)
    required = _required_parameters(next((f for f in functions if f.name == inputs), None))
    callable_ = [n for n in public if n not in (reference, inputs)]
    entry = callable_[0] if callable_ else f"TODO_{stem}"
    name = re.sub(r"\W", "_", stem)
    while name in taken:
        name += "_2"
    taken.add(name)
    what = f"@triton.jit {', '.join(kernels)}" if kernels else f"a torch {language} extension"
    others = f"; other public functions: {', '.join(callable_[1:])}" if len(callable_) > 1 else ""
    targets = "[cuda, xpu]" if language == "triton" else "[cuda]" if language == "cuda" else "[cpu, cuda]"
    lines = [f"  {name}:  # {rel}: {what}{others}",
             f"    file: {rel}",
             f"    entry: {entry}" + ("  # TODO: the function that launches the kernel" if not callable_ else ""),
             f"    reference: {rel}:{reference or 'reference'}"
             + ("" if reference else "  # TODO: write reference(...), the same call in plain PyTorch"),
             f"    inputs: {rel}:{inputs or 'make_inputs'}"
             + ("" if inputs else "  # TODO: write make_inputs(**shape) returning the call's arguments"),
             "    shapes:",
             "      - {}  # " + (f"TODO: {inputs} needs {', '.join(required)}: one mapping per size, e.g. "
                             f"{{{', '.join(f'{p}: ...' for p in required)}}}" if required else
                             "TODO: keyword arguments for the inputs callable, one mapping per size to check and time"
                             if inputs is None else f"{inputs}'s defaults; add a mapping per size to check and time"),
             f"    targets: {targets}",
             f"    language: {language}"]
    return "\n".join(lines)


def _required_parameters(function: ast.FunctionDef | None) -> list[str]:
    """The parameters an inputs callable has no default for (a shape set must give them)."""
    if function is None:
        return []
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    without = positional[:len(positional) - len(args.defaults)]
    keyword = [a for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    return [a.arg for a in (*without, *keyword) if a.arg != "device"]
