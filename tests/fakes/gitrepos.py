"""Real git repositories for tests: a bare "origin" and a clone of it, in a temp dir."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
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


def _build(tmp: Path) -> Repos:
    """main: softmax.py, rmsnorm.py, README; PR branch `feature` changes rmsnorm.py and adds gelu.py;
    main then moves on (changes README) so base...head differs from base..head."""
    origin = tmp / "origin.git"
    git(tmp, "init", "-q", "--bare", "-b", "main", str(origin))
    seed = tmp / "seed"
    git(tmp, "clone", "-q", str(origin), str(seed))
    git(seed, "checkout", "-q", "-b", "main")
    write(seed, "kernels/softmax.py", "def softmax(x):\n    return x.softmax(-1)\n")
    write(seed, "kernels/rmsnorm.py", "BLOCK = 128\n")
    write(seed, "README.md", "hello\n")
    fork_point = commit_all(seed, "initial")
    git(seed, "push", "-q", "origin", "main")
    git(seed, "checkout", "-q", "-b", "feature")
    write(seed, "kernels/rmsnorm.py", "BLOCK = 256\n")
    write(seed, "kernels/gelu.py", "def gelu(x):\n    return x\n")
    head = commit_all(seed, "faster rmsnorm, add gelu")
    git(seed, "push", "-q", "origin", "feature")
    git(seed, "checkout", "-q", "main")
    write(seed, "README.md", "hello again\n")
    base = commit_all(seed, "docs on main")
    git(seed, "push", "-q", "origin", "main")
    clone = tmp / "work"
    git(tmp, "clone", "-q", str(origin), str(clone))
    git(clone, "fetch", "-q", "origin", "feature:refs/remotes/origin/feature")
    shutil.rmtree(seed)
    return Repos(origin=origin, clone=clone, base_sha=base, head_sha=head, fork_point=fork_point)
