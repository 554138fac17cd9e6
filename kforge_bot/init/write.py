"""`kforge-bot init`'s run: the folders to scan, the drafter (--draft), the proposal printed or written beside the
library as kforge.yaml (never over a file that exists)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kforge_bot.errors import KforgeError
from kforge_bot.init.entries import REFERENCES_MODULE
from kforge_bot.init.files import python_files
from kforge_bot.init.propose import ManifestProposal, propose_library
from kforge_bot.init.scan.modules import dotted_name
from kforge_bot.kernelspec import MANIFEST_NAME
from kforge_bot.targets import choose_target

DRAFTS_FOLDER = "kforge_drafts"  # where `--draft` writes each checked draft, one module per kernel


def run_init(repo: Path, paths: tuple[Path, ...], write_file: bool, draft: bool, draft_limit: int, target: str,
             isolation: str | None) -> int:
    """Propose a kforge.yaml for the repository at `repo` (`paths`: folders below it that limit the scan) and print
    it, or with `write_file` write it and the modules it names beside the library. Returns the exit code."""
    if not repo.is_dir():
        raise KforgeError("not a directory", path=repo, hint="give the repository's root")
    repo = repo.resolve()
    scan = tuple(_scan_folder(repo, path) for path in paths)
    drafter = _drafter(repo, target, isolation) if draft else None
    proposal = propose_library(repo, drafter, draft_limit, scan)
    if write_file:
        _write(repo, proposal)
    else:
        _print(proposal)
    return 0


def _print(proposal: ManifestProposal) -> None:
    """The manifest, then each module --write would put beside it, commented out."""
    click.echo(proposal.manifest, nl=False)
    extra = ([(REFERENCES_MODULE, proposal.references)] if proposal.references is not None else []) + \
        sorted(proposal.drafts.items())
    for name, text in extra:
        click.echo(f"# --- {name}, written beside kforge.yaml by --write ---")
        click.echo("".join(f"#   {line}\n" for line in text.splitlines()), nl=False)


def _write(repo: Path, proposal: ManifestProposal) -> None:
    """kforge.yaml and the modules it names, written in `repo` only when none of them exists yet."""
    if not proposal.entries:
        raise KforgeError("no new kernel files to propose an entry for", path=repo,
                          hint="run `kforge-bot init` without --write to see what was found")
    files = {MANIFEST_NAME: proposal.manifest, **proposal.drafts}
    if proposal.references is not None:
        files[REFERENCES_MODULE] = proposal.references
    for rel in files:
        if (repo / rel).exists():
            raise KforgeError("already exists; init never overwrites it", path=repo / rel,
                              hint="run `kforge-bot init` without --write to see the proposal, and merge it by hand")
    for rel, text in sorted(files.items(), key=lambda item: item[0] == MANIFEST_NAME):  # the manifest last
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    also = "".join(f" and {repo / rel}" for rel in sorted(files) if rel != MANIFEST_NAME)
    click.echo(f"wrote {repo / MANIFEST_NAME}{also}: review what came from tests or drafts, fill in the TODOs, then "
               "run `kforge-bot list` and `kforge-bot check --all`")


def _drafter(repo: Path, target: str, isolation: str | None) -> Callable[..., Any]:
    from kforge_bot.agents.llm import LLMClient, configured, endpoint_from_env
    from kforge_bot.config.policy import load_policy
    from kforge_bot.evaluate.isolation import announcement
    from kforge_bot.init.draft import Drafter

    if not configured():
        raise KforgeError("--draft needs an LLM endpoint", hint="set OPENAI_BASE_URL (and OPENAI_API_KEY if it "
                                                                "needs one), or run init without --draft")
    kind = choose_target(target, here=False).device_kind(("cuda", "xpu", "cpu"))
    # A draft is checked for correctness only, on one seed, sandboxed as `check` would run it.
    settings = load_policy(None).eval_settings("check", seeds=1, measure=False, profile=False,
                                               isolation=isolation, timeout_s=300.0)
    click.echo(announcement(settings.isolation), err=True)
    modules = frozenset(dotted_name(p.relative_to(repo).as_posix()).split(".")[0] for p in python_files(repo))
    return Drafter(repo, LLMClient(endpoint_from_env()), kind, settings, DRAFTS_FOLDER, modules)


def _scan_folder(repo: Path, path: Path) -> str:
    """A PATH argument as a folder relative to the repository (given relative to it, or to the working folder)."""
    for candidate in (repo / path, path.resolve()):
        if candidate.is_dir() and candidate.resolve().is_relative_to(repo):
            return candidate.resolve().relative_to(repo).as_posix()
    raise KforgeError("not a folder inside the repository", path=path,
                      hint=f"give a folder below {repo}, e.g. the library's package")

