"""`kforge-bot init [REPO]`: propose a kforge.yaml for an existing repository (kforge_bot.init does the work)."""

from __future__ import annotations

from pathlib import Path

import click

from kforge_bot.commands import examples, target_option
from kforge_bot.init.entries import REFERENCES_MODULE
from kforge_bot.init.write import DRAFTS_FOLDER, run_init


@click.command("init", epilog=examples(
    "kforge-bot init                 # print a proposed kforge.yaml for this repository",
    "kforge-bot init ../repo --write # write it as ../repo/kforge.yaml (never over an existing one)",
    "kforge-bot init --draft --target cuda  # with OPENAI_BASE_URL set: LLM drafts, each run on cuda first"))
@click.argument("repo", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, file_okay=False))
@click.option("--write", "write_file", is_flag=True,
              help=f"Write REPO/kforge.yaml (and REPO/{REFERENCES_MODULE} when tests gave references, REPO/"
                   f"{DRAFTS_FOLDER}/ for checked drafts) instead of printing them.")
@click.option("--draft", is_flag=True,
              help="Ask the LLM endpoint (OPENAI_BASE_URL / OPENAI_API_KEY) for the reference and inputs no file or "
                   "test gives, and propose each only after it ran against the kernel on --target.")
@click.option("--draft-limit", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Launchers to draft for, at most.")
@target_option("Where --draft runs the drafts against the kernel:", default="auto")
@click.option("--isolation", type=click.Choice(["required", "preferred", "off"]), default=None,
              help="The OS sandbox for the drafts' runs (default: the policy's, as for `check`).")
def init(repo: Path, paths: tuple[Path, ...], write_file: bool, draft: bool, draft_limit: int, target: str,
         isolation: str | None) -> int:
    """Propose a kforge.yaml: an entry per public launcher of a Triton kernel or torch-extension file. PATHS
    (folders below REPO) limit the scan to the library's own folders; its tests are read wherever they are."""
    return run_init(repo, paths, write_file, draft, draft_limit, target, isolation)
