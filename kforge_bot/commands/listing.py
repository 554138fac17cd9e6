"""`kforge-bot list`: the kernels a repository manages, as the gate and the PR bot see them."""

from __future__ import annotations

from pathlib import Path

import click

from kforge_bot.commands import examples, json_option, write_json
from kforge_bot.config.policy import load_policy
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.api import import_problems
from kforge_bot.evaluate.isolation import announcement
from kforge_bot.kernelspec.kernels import discover


@click.command("list", epilog=examples(
    "kforge-bot list            # the kernels this repository manages",
    "kforge-bot list ../repo --json"))
@click.argument("repo", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.option("--policy", "policy_path", default=None,
              help="Policy file or built-in name (default: the default policy).")
@json_option("The list.")
@click.option("--import", "try_imports", is_flag=True,
              help="Import each kernel's entry, reference and inputs in a worker (sandboxed, as `check` runs them), "
                   "calling nothing; without it, only the manifest and the files are read.")
def list_kernels(repo: Path, policy_path: str | None, json_path: str | None, try_imports: bool) -> int:
    """List the managed kernels under REPO: every kforge.yaml entry and KernelBench file within the policy's
    kernel_paths, with its format, file, targets and language; a kernel that does not load says why.
    Exit status 0, or 1 when any kernel does not load (or, with --import, does not import)."""
    if not repo.is_dir():
        raise KforgeError("not a directory", path=repo, hint="give the repository's root")
    notes: list[str] = []
    policy = load_policy(policy_path)
    kernels = discover(repo, policy, strict=True, notes=notes)  # a manifest that does not load is an error here
    settings = policy.eval_settings("check")  # imports only, sandboxed as `check` runs them
    if try_imports and kernels and json_path != "-":
        click.echo(announcement(settings.isolation), err=True)
    rows = []
    ordered = sorted(kernels.values(), key=lambda k: k.id)
    loaded = [k.spec for k in ordered if k.spec is not None]
    # One worker per target (and env:), importing each library once for all its kernels.
    problems = dict(zip(map(id, loaded), import_problems(loaded, settings))) if try_imports and loaded else {}
    for kernel in ordered:
        spec = kernel.spec
        error = kernel.error
        imports = "not tried"
        if try_imports and spec is not None:
            problem = problems[id(spec)]
            imports = "ok" if problem is None else problem
            error = error or (None if problem is None else f"does not import in its worker: {problem}")
        rows.append({"id": kernel.id, "format": kernel.format, "file": kernel.file,
                     "targets": list(spec.targets) if spec and spec.targets else "any",
                     "language": spec.language if spec else None, "shape_sets": len(spec.shape_sets) if spec else 0,
                     "error": error, "imports": imports})
    write_json({"repo": str(repo.resolve()), "kernels": rows, "notes": notes}, json_path)
    if json_path != "-":
        if not rows:
            click.echo(f"no managed kernels under {repo} (add a kforge.yaml, or KernelBench files)")
        for row in rows:
            targets = row["targets"] if isinstance(row["targets"], str) else ",".join(row["targets"])
            state = f"DOES NOT LOAD: {row['error']}" if row["error"] else \
                f"{row['language']}, {row['shape_sets']} shape set(s), targets {targets}"
            click.echo(f"{row['id']}  [{row['format']}]  {row['file']}  {state}")
        if rows and not try_imports:
            # Read, not run: a kernel listed here can still fail to import where check runs it.
            click.echo("note: files and manifests read, nothing imported; `kforge-bot list --import` imports each "
                       "kernel in a worker, as check does", err=True)
        for note in notes:
            click.echo(f"note: {note}", err=True)
    return 1 if any(r["error"] for r in rows) else 0
