"""Real git repositories for tests: a bare "origin" and a clone of it, in a temp dir."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HUMAN = {"GIT_AUTHOR_NAME": "Ada Human", "GIT_AUTHOR_EMAIL": "ada@example.com",
         "GIT_COMMITTER_NAME": "Ada Human", "GIT_COMMITTER_EMAIL": "ada@example.com"}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, **HUMAN, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    proc = subprocess.run(["git", *args], cwd=cwd, env=full_env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr}")
    return proc.stdout.strip()


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def commit_all(root: Path, message: str, env: dict[str, str] | None = None) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message, env=env)
    return git(root, "rev-parse", "HEAD")


@dataclass
class Repos:
    origin: Path  # bare
    clone: Path   # the Action's checkout
    base_sha: str  # main's tip
    head_sha: str  # the PR branch's tip
    fork_point: str


def make_repos(tmp: Path) -> Repos:
    """A fresh copy of the standard pair (see `_build`) in `tmp`: copied, not rebuilt, for speed."""
    template_root, template = _template()
    shutil.copytree(template_root, tmp, dirs_exist_ok=True, symlinks=True)
    repos = Repos(origin=tmp / "origin.git", clone=tmp / "work", base_sha=template.base_sha,
                  head_sha=template.head_sha, fork_point=template.fork_point)
    git(repos.clone, "remote", "set-url", "origin", str(repos.origin))
    return repos


@functools.lru_cache(maxsize=1)
def _template() -> tuple[Path, Repos]:
    root = Path(tempfile.mkdtemp(prefix="kforge-repos-"))
    return root, _build(root)


def push_branches(tmp: Path, base: Mapping[str, str], head: Mapping[str, str | None], *,
                  links: Mapping[str, Path] | None = None, messages: tuple[str, str] = ("base", "head"),
                  env: dict[str, str] | None = None) -> tuple[Path, Path, str, str]:
    """A pull request's two branches, pushed to a bare `origin` (tmp/origin.git): main holds the files `base`;
    `feature` changes them by `head` (a file's new text, or None: deleted) and `links` (symbolic links to their
    targets). Returns (origin, the seed clone they were made in at tmp/seed, on feature; main's tip, feature's)."""
    origin = tmp / "origin.git"
    git(tmp, "init", "-q", "--bare", "-b", "main", str(origin))
    seed = tmp / "seed"
    git(tmp, "clone", "-q", str(origin), str(seed))
    git(seed, "checkout", "-q", "-b", "main")
    for rel, text in base.items():
        write(seed, rel, text)
    base_sha = commit_all(seed, messages[0], env=env)
    git(seed, "push", "-q", "origin", "main")
    git(seed, "checkout", "-q", "-b", "feature")
    for rel, text in head.items():
        if text is None:
            (seed / rel).unlink()
        else:
            write(seed, rel, text)
    for rel, target in (links or {}).items():
        (seed / rel).unlink(missing_ok=True)
        (seed / rel).symlink_to(target)
    head_sha = commit_all(seed, messages[1], env=env)
    git(seed, "push", "-q", "origin", "feature")
    return origin, seed, base_sha, head_sha


def action_checkout(tmp: Path, origin: Path, sha: str) -> Path:
    """The Action's checkout of a pull request's head: a clone of `origin` (tmp/work), detached at `sha`."""
    work = tmp / "work"
    git(tmp, "clone", "-q", str(origin), str(work))
    git(work, "checkout", "-q", "--detach", sha)
    return work


def _build(tmp: Path) -> Repos:
    """main: softmax.py, rmsnorm.py, README; PR branch `feature` changes rmsnorm.py and adds gelu.py;
    main then moves on (changes README) so base...head differs from base..head."""
    origin, seed, fork_point, head = push_branches(
        tmp, {"kernels/softmax.py": "def softmax(x):\n    return x.softmax(-1)\n",
              "kernels/rmsnorm.py": "BLOCK = 128\n", "README.md": "hello\n"},
        {"kernels/rmsnorm.py": "BLOCK = 256\n", "kernels/gelu.py": "def gelu(x):\n    return x\n"},
        messages=("initial", "faster rmsnorm, add gelu"))
    git(seed, "checkout", "-q", "main")
    write(seed, "README.md", "hello again\n")
    base = commit_all(seed, "docs on main")
    git(seed, "push", "-q", "origin", "main")
    clone = tmp / "work"
    git(tmp, "clone", "-q", str(origin), str(clone))
    git(clone, "fetch", "-q", "origin", "feature:refs/remotes/origin/feature")
    shutil.rmtree(seed)
    return Repos(origin=origin, clone=clone, base_sha=base, head_sha=head, fork_point=fork_point)
