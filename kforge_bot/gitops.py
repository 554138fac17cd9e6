"""Git operations for the pull-request bot and the gate (the git binary; GitPython, imported lazily, for the bot's
commits only).

What the bot needs from git, and nothing else:
- which files a PR changed (base...head: merge-base semantics, like GitHub's "Files changed");
- a file's content at a revision;
- a branch the bot owns (`kforge/pr-<N>/<kernel>`): one bot commit on top of the PR's head,
  written without touching the working tree, pushed to `origin` with a lease so a concurrent
  human push is never overwritten;
- whether a human pushed to that branch (then the bot stops updating it, like Dependabot);
- a throwaway worktree of a revision (to evaluate the base or the head side by side).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from kforge_bot.errors import KforgeError

if TYPE_CHECKING:  # pragma: no cover
    import git

BRANCH_PREFIX = "kforge/"
TRAILER = "Kforge-Bot"
# How far back to look for the bot's own commit before deciding a branch is not the bot's.
_MAX_WALK = 100
_PUSH_HINT = "someone pushed to it meanwhile, a branch rule protects kforge/*, or the token lacks contents: write"


@dataclass(frozen=True)
class Identity:
    name: str
    email: str


# The identity the bot commits as; it is how the bot recognises its own commits on its branches.
BOT_IDENTITY = Identity("kforge-bot", "kforge-bot@users.noreply.github.com")


@dataclass(frozen=True)
class ChangedFile:
    path: str
    status: str  # A added, M modified, D deleted, R renamed, C copied, T type changed
    old_path: str | None = None


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    author_name: str
    author_email: str
    committer_email: str
    summary: str


@dataclass(frozen=True)
class PushResult:
    branch: str
    status: str  # "created" | "updated" | "unchanged" | "human-pushed"
    sha: str | None  # the branch's tip on the remote after this call
    foreign_commits: tuple[CommitInfo, ...] = ()

    @property
    def pushed(self) -> bool:
        return self.status in ("created", "updated")


def _git():
    try:
        import git
    except ImportError as exc:  # pragma: no cover - a hard dependency, missing only on GPU boxes
        raise KforgeError("GitPython is not installed", hint="pip install gitpython") from exc
    return git


def open_repo(path: str | Path) -> git.Repo:
    git = _git()
    try:
        return git.Repo(str(path), search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise KforgeError("not a git repository", path=path, hint="run inside a clone (actions/checkout)") from exc


# Settings a checkout could carry that would run code inside the bot: hooks (a planted pre-push or
# post-checkout), an fsmonitor command, the ext:: transport. Given on every command, they override the
# checkout's own configuration; git runs builtins only, so no alias applies.
SAFE_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never",
               "-c", "core.attributesFile=/dev/null")


def git_command(*args: str) -> list[str]:
    """The argv of a git command as the bot runs it: with SAFE_CONFIG."""
    return ["git", *SAFE_CONFIG, *args]


def git_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a git command as the bot runs it: no system-wide configuration either."""
    return {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", **(extra or {})}


def _cli(repo_path: str | Path, *args: str, env: Mapping[str, str] | None = None, what: str,
         hint: str | None = None, stdin: bytes | None = None) -> str:
    """Run the git binary in `repo_path`. The read-only operations the gate needs go through here alone, so
    `kforge-bot gate` works on GPU runners without GitPython (only the PR bot's writes need it)."""
    try:
        proc = subprocess.run(git_command(*args), cwd=str(repo_path), input=stdin, capture_output=True,
                              env=git_environment(env))
    except FileNotFoundError as exc:
        raise KforgeError("git is not installed", hint="install git (the gate and the PR bot need it)") from exc
    except NotADirectoryError as exc:
        raise KforgeError("not a git repository", path=repo_path, hint="run inside a clone") from exc
    if proc.returncode != 0:
        detail = proc.stderr.decode(errors="replace").strip().replace("\n", " ")
        if "not a git repository" in detail:
            raise KforgeError("not a git repository", path=repo_path, hint="run inside a clone (actions/checkout)")
        raise KforgeError(f"{what}: {detail or f'git {args[0]} exited with {proc.returncode}'}",
                          path=str(repo_path), hint=hint)
    return proc.stdout.decode(errors="replace")


def _run(repo: git.Repo, *args: str, env: Mapping[str, str] | None = None, what: str, hint: str | None = None,
         stdin: bytes | None = None) -> str:
    return _cli(repo.working_dir or repo.git_dir, *args, env=env, what=what, hint=hint, stdin=stdin)


def toplevel(path: str | Path) -> Path | None:
    """The working tree's root that holds `path`, or None outside a repository."""
    proc = subprocess.run(git_command("rev-parse", "--show-toplevel"), cwd=str(path), capture_output=True, text=True,
                          check=False, env=git_environment())
    return Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else None


def has_commit(repo_path: str | Path, rev: str = "HEAD") -> bool:
    proc = subprocess.run(git_command("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"), cwd=str(repo_path),
                          capture_output=True, check=False, env=git_environment())
    return proc.returncode == 0


def export_tree(repo_path: str | Path, rev: str, dest: Path, keep: Callable[[str], bool]) -> None:
    """The files of `rev` whose path `keep` accepts, read from git's objects (never the index, which `git
    commit` holds locked while hooks run), written under `dest`."""
    proc = subprocess.Popen(git_command("archive", "--format=tar", rev), cwd=str(repo_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=git_environment())
    assert proc.stdout is not None
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
            for member in archive:
                name = PurePosixPath(member.name)
                if not member.isfile() or name.is_absolute() or ".." in name.parts or not keep(member.name):
                    continue
                data = archive.extractfile(member)
                if data is None:
                    continue
                target = dest.joinpath(*name.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data.read())
    finally:
        _, err = proc.communicate()
    if proc.returncode != 0:
        raise KforgeError(f"cannot read the committed tree: {err.decode(errors='replace').strip()}", path=repo_path)


def _neutral_filters(repo_path: str | Path) -> list[str]:
    """`-c` settings that turn every configured content filter into a no-op for one checkout: a smudge
    filter is a command the checkout's configuration names, and it would run inside the bot."""
    proc = subprocess.run(git_command("config", "--name-only", "--get-regexp", r"^filter\."), cwd=str(repo_path),
                          capture_output=True, text=True, check=False, env=git_environment())
    names = sorted({line.split(".")[1] for line in proc.stdout.splitlines() if line.count(".") >= 2})
    out: list[str] = []
    for name in names:
        out += ["-c", f"filter.{name}.smudge=cat", "-c", f"filter.{name}.clean=cat", "-c", f"filter.{name}.process=",
                "-c", f"filter.{name}.required=false"]
    return out


def resolve(repo_path: str | Path, rev: str) -> str:
    """The full commit sha of `rev`; a clear error when the revision is not in the clone."""
    return _cli(repo_path, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}",
                what=f"unknown revision {rev!r}",
                hint="fetch it first (actions/checkout with fetch-depth: 0)").strip()


def merge_base(repo_path: str | Path, base: str, head: str) -> str:
    base_sha, head_sha = resolve(repo_path, base), resolve(repo_path, head)
    return _cli(repo_path, "merge-base", base_sha, head_sha, what=f"no common ancestor of {base} and {head}",
                hint="the clone is probably shallow: use actions/checkout with fetch-depth: 0").strip()


def changed_files(repo_path: str | Path, base: str, head: str) -> list[ChangedFile]:
    """Files changed by `head` since it forked from `base` (git diff base...head), renames detected."""
    mb = merge_base(repo_path, base, head)
    head_sha = resolve(repo_path, head)
    out = _cli(repo_path, "diff", "--name-status", "-z", "--find-renames", "--no-ext-diff", mb, head_sha,
               what=f"cannot diff {base}...{head}")
    parts = out.split("\0")
    result: list[ChangedFile] = []
    i = 0
    while i < len(parts) and parts[i]:
        status = parts[i]
        kind = status[0]
        if kind in ("R", "C"):
            result.append(ChangedFile(path=parts[i + 2], status=kind, old_path=parts[i + 1]))
            i += 3
        else:
            result.append(ChangedFile(path=parts[i + 1], status=kind))
            i += 2
    return result


def read_file_at(repo_path: str | Path, rev: str, path: str) -> str | None:
    """The text of `path` at `rev`, or None when the file does not exist there (or is not a file)."""
    sha = resolve(repo_path, rev)
    listing = _cli(repo_path, "ls-tree", "-z", sha, "--", path, what=f"cannot list {path} at {rev}")
    entry = listing.split("\0")[0]
    if not entry or entry.split(None, 2)[1] != "blob":
        return None
    data = subprocess.run(git_command("cat-file", "blob", f"{sha}:{path}"), cwd=str(repo_path), capture_output=True,
                          env=git_environment())
    if data.returncode != 0:
        return None
    try:
        return data.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KforgeError(f"not a UTF-8 text file at {rev[:12]}", path=path) from exc


# ---------------------------------------------------------------------------------------------
# The bot's branches

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def bot_branch(pr_number: int, kernel: str) -> str:
    """`kforge/pr-<N>/<kernel>`, with the kernel name reduced to characters safe in a ref."""
    name = _SAFE.sub("-", kernel).strip(".-") or "kernel"
    name = re.sub(r"\.{2,}", ".", name)
    if name.endswith(".lock"):
        name = name[: -len(".lock")] + "-lock"
    return f"{BRANCH_PREFIX}pr-{int(pr_number)}/{name}"


def parse_bot_branch(branch: str) -> tuple[int, str] | None:
    """(PR number, kernel) for a bot branch name, else None (so a follow-up PR leads to its origin)."""
    m = re.fullmatch(rf"{re.escape(BRANCH_PREFIX)}pr-(\d+)/([A-Za-z0-9._-]+)", branch)
    return (int(m.group(1)), m.group(2)) if m else None


def trailer_line(pr_number: int, kernel: str) -> str:
    return f"{TRAILER}: pr={int(pr_number)} kernel={kernel}"


def remote_branch_sha(repo_path: str | Path, branch: str, remote: str = "origin") -> str | None:
    repo = open_repo(repo_path)
    out = _run(repo, "ls-remote", "--heads", remote, f"refs/heads/{branch}",
               what=f"cannot list branches of remote {remote!r}", hint="check the remote URL and credentials")
    for line in out.splitlines():
        sha, _, ref = line.partition("\t")
        if ref == f"refs/heads/{branch}":
            return sha
    return None


def remote_branches(repo_path: str | Path, pattern: str, *, remote: str = "origin",
                    what: str = "cannot list the remote's branches") -> list[str]:
    """The remote's branches whose name matches `pattern` (a git ref pattern below refs/heads/, e.g. `kforge/*`)."""
    out = _run(open_repo(repo_path), "ls-remote", "--heads", remote, f"refs/heads/{pattern}", what=what)
    return [line.partition("\t")[2].removeprefix("refs/heads/") for line in out.splitlines() if line.strip()]


def _is_bot_commit(commit: git.Commit, identity: Identity) -> bool:
    message = commit.message if isinstance(commit.message, str) else commit.message.decode(errors="replace")
    return (commit.author.email == identity.email and commit.committer.email == identity.email
            and f"\n{TRAILER}: " in f"\n{message}")


def _info(commit: git.Commit) -> CommitInfo:
    return CommitInfo(sha=commit.hexsha, author_name=commit.author.name or "", author_email=commit.author.email or "",
                      committer_email=commit.committer.email or "", summary=str(commit.summary))


def foreign_commits(repo_path: str | Path, tip: str, identity: Identity = BOT_IDENTITY) -> list[CommitInfo]:
    """Commits on a bot branch that the bot did not make, newest first.

    A bot branch is always the PR head plus one bot commit. Walking first parents from the tip,
    everything above the first bot commit was pushed by someone else. If no bot commit is found at
    all, the branch was never the bot's, and its tip is reported as foreign.
    """
    repo = open_repo(repo_path)
    commit = repo.commit(resolve(repo_path, tip))
    foreign: list[CommitInfo] = []
    for _ in range(_MAX_WALK):
        if _is_bot_commit(commit, identity):
            return foreign
        foreign.append(_info(commit))
        if not commit.parents:
            break
        commit = commit.parents[0]
    return foreign[:1] if foreign else []


def _ensure_commit(repo: git.Repo, sha: str, remote: str) -> None:
    """Fetch `sha` when the clone lacks it (actions/checkout leaves the PR's merge commit, depth 1)."""
    git = _git()
    try:
        repo.commit(sha)
        return
    except (ValueError, git.BadName):
        pass
    _run(repo, "fetch", "--no-tags", "--quiet", remote, sha, what=f"cannot fetch commit {sha[:12]} from {remote}",
         hint="use actions/checkout with fetch-depth: 0")


def ensure_commit(repo_path: str | Path, sha: str, remote: str = "origin") -> None:
    """`_ensure_commit` for a checkout's path."""
    _ensure_commit(open_repo(repo_path), sha, remote)


def commit_files(repo_path: str | Path, parent: str | None, files: Mapping[str, str | bytes | None], message: str,
                 identity: Identity = BOT_IDENTITY) -> str:
    """A new commit on `parent` (None: a root commit) with `files` replaced (None deletes), made without touching
    the working tree or the real index: the Action's checkout stays exactly as it was."""
    if not files:
        raise KforgeError("nothing to commit: no files given")
    repo = open_repo(repo_path)
    parent_sha = resolve(repo_path, parent) if parent is not None else None
    parent_tree = repo.commit(parent_sha).tree if parent_sha is not None else None
    with tempfile.TemporaryDirectory(prefix="kforge-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _run(repo, "read-tree", *([parent_sha] if parent_sha else ["--empty"]), env=env,
             what="cannot read the parent tree")
        for path, content in sorted(files.items()):
            if path.startswith("/") or ".." in Path(path).parts:
                raise KforgeError("refusing a path outside the repository", path=path)
            if content is None:
                _run(repo, "update-index", "--force-remove", "--", path, env=env, what=f"cannot remove {path}")
                continue
            data = content.encode("utf-8") if isinstance(content, str) else content
            blob = _run(repo, "hash-object", "-w", "--stdin", stdin=data, what=f"cannot store {path}").strip()
            try:
                mode = f"{(parent_tree / path).mode:o}" if parent_tree is not None else "100644"
            except KeyError:
                mode = "100644"
            _run(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env,
                 what=f"cannot stage {path}")
        tree = _run(repo, "write-tree", env=env, what="cannot write the tree").strip()
    ident = {"GIT_AUTHOR_NAME": identity.name, "GIT_AUTHOR_EMAIL": identity.email,
             "GIT_COMMITTER_NAME": identity.name, "GIT_COMMITTER_EMAIL": identity.email}
    parents = ["-p", parent_sha] if parent_sha else []
    return _run(repo, "commit-tree", tree, *parents, "-m", message, env=ident,
                what="cannot create the commit").strip()


def run_git(repo_path: str | Path, *args: str, what: str, hint: str | None = None) -> str:
    """A git command in `repo_path` as the bot runs every one (SAFE_CONFIG, no system configuration); its stdout,
    or a KforgeError saying `what` failed."""
    return _cli(repo_path, *args, what=what, hint=hint)


def ref_sha(repo_path: str | Path, ref: str) -> str | None:
    """The commit a full ref name (refs/...) points to here, or None where it does not exist."""
    proc = subprocess.run(git_command("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"), cwd=str(repo_path),
                          capture_output=True, text=True, check=False, env=git_environment())
    return proc.stdout.strip() if proc.returncode == 0 else None


def push_bot_branch(repo_path: str | Path, *, branch: str, parent: str, files: Mapping[str, str | bytes | None],
                    message: str, identity: Identity = BOT_IDENTITY, remote: str = "origin") -> PushResult:
    """Create or update the bot's `branch` as `parent` + one commit with `files`, and push it.

    Never pushes to a branch outside `kforge/`, never to one whose commits are not all the bot's
    (returns status "human-pushed" and leaves it alone), and pushes with a lease on the tip it
    inspected, so a push that races a human's is rejected rather than overwriting it.
    """
    if not branch.startswith(BRANCH_PREFIX) or parse_bot_branch(branch) is None:
        raise KforgeError(f"refusing to push to {branch!r}: the bot only writes branches it names "
                          f"{BRANCH_PREFIX}pr-<N>/<kernel>")
    if f"\n{TRAILER}: " not in f"\n{message}":
        pr, kernel = parse_bot_branch(branch)  # type: ignore[misc]
        message = f"{message.rstrip()}\n\n{trailer_line(pr, kernel)}\n"
    repo = open_repo(repo_path)
    _ensure_commit(repo, parent, remote)
    parent_sha = resolve(repo_path, parent)

    remote_sha = remote_branch_sha(repo_path, branch, remote)
    if remote_sha is not None:
        _run(repo, "fetch", "--no-tags", "--quiet", remote, f"+refs/heads/{branch}:refs/kforge/remote/{branch}",
             what=f"cannot fetch {branch} from {remote}")
        foreign = foreign_commits(repo_path, remote_sha, identity)
        if foreign:
            return PushResult(branch=branch, status="human-pushed", sha=remote_sha, foreign_commits=tuple(foreign))

    new_sha = commit_files(repo_path, parent_sha, files, message, identity)
    if remote_sha is not None:
        old = repo.commit(remote_sha)
        new = repo.commit(new_sha)
        if old.tree.hexsha == new.tree.hexsha and [p.hexsha for p in old.parents] == [parent_sha]:
            return PushResult(branch=branch, status="unchanged", sha=remote_sha)

    # The lease alone allows the non-fast-forward replace; adding --force would disable it. The push goes
    # through the git binary with SAFE_CONFIG (no pre-push hook a checkout could carry), after every
    # evaluation has ended, from the bot's own commit (no working tree involved).
    lease = f"--force-with-lease=refs/heads/{branch}:{remote_sha or ''}"
    out_ref = f"refs/kforge/out/{branch}"
    _run(repo, "update-ref", out_ref, new_sha, what="cannot record the new commit")
    try:
        if remote not in _run(repo, "remote", what="cannot list remotes").split():
            raise KforgeError(f"no remote named {remote!r}", path=str(repo.working_dir))
        out = _run(repo, "push", "--porcelain", lease, remote, f"{out_ref}:refs/heads/{branch}",
                   what=f"push of {branch} to {remote} failed", hint=_PUSH_HINT)
    finally:
        with contextlib.suppress(KforgeError):
            _run(repo, "update-ref", "-d", out_ref, what="cannot delete a temporary ref")
    # Porcelain lines: <flag> TAB <from>:<to> TAB <summary>; '!' is a rejection.
    results = [line.split("\t") for line in out.splitlines() if line.count("\t") >= 2]
    mine = [r for r in results if r[1].endswith(f":refs/heads/{branch}")]
    if not mine or any(r[0].strip() == "!" for r in mine):
        summary = "; ".join(f"{r[1]}: {r[2].strip()}" for r in mine) or "no result"
        raise KforgeError(f"push of {branch} to {remote} was rejected ({summary})", path=str(repo.working_dir),
                          hint=_PUSH_HINT)
    return PushResult(branch=branch, status="updated" if remote_sha else "created", sha=new_sha)


@contextlib.contextmanager
def worktree(repo_path: str | Path, rev: str) -> Iterator[Path]:
    """A detached checkout of `rev` in a temporary directory, removed afterwards."""
    sha = resolve(repo_path, rev)
    tmp = Path(tempfile.mkdtemp(prefix="kforge-wt-"))
    path = tmp / "tree"
    try:
        _cli(repo_path, *_neutral_filters(repo_path), "worktree", "add", "--detach", "--quiet", str(path), sha,
             what=f"cannot check out {rev}")
    except BaseException:  # a read-only checkout refuses the worktree: nothing of ours may stay behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        yield path
    finally:
        try:
            _cli(repo_path, "worktree", "remove", "--force", str(path), what="cannot remove the worktree")
        except KforgeError:
            pass
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(KforgeError):
            _cli(repo_path, "worktree", "prune", what="cannot prune worktrees")
