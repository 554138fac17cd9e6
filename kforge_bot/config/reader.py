"""The one reader of files a pull request controls: kforge.yaml, a GPU MODE task.yml and its problem folder,
policies, runner files, kernel sources, and every path any of them names.

The bot reads these on the host, outside any sandbox, in the process that holds the GitHub token, the LLM key
and the cache-signing key. So every read goes through here, and here alone (tests/config/test_reader.py proves
that no other module opens them):

- a path resolves, symbolic links included, inside the `boundary` (the checkout) or is refused: no `../`, no
  link to `/proc/self/environ`, `~/.config` or another repository; nor into the checkout's `.git` (no file of a
  repository's content lies there, and `actions/checkout` leaves the token's header in `.git/config`);
- only a regular file is read: no `/dev/zero`, FIFO, socket or folder (checked on the open file, not the name,
  and opened without blocking, so a FIFO cannot hang the bot);
- at most `limit` bytes are read, and a file over it is refused, not cut;
- YAML goes through kforge_bot.config.yamlcheck's strict loader (no anchors or aliases, no duplicate keys);
- a name that reaches a log, a job summary or a PR comment (a kernel's, a problem folder's) is held to
  `SAFE_NAME_RE`, so it can render nothing but itself.

Every failure is a one-line KforgeError naming the file.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kforge_bot.config.yamlcheck import MAX_YAML_BYTES, load_yaml_text
from kforge_bot.errors import KforgeError

MAX_SOURCE_BYTES = 8 << 20  # a kernel, reference, inputs or support file
MAX_DATA_BYTES = 4 << 30  # a data file a kernel reads (weights), hashed for the result cache's key, never kept
# A name shown in reports: a kernel's, a problem folder's. Letters, digits, '.', '_' and '-': no Markdown, no
# mention, no link, no workflow command can be written with these alone.
SAFE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# A repository-relative path shown in reports (a kernel's file, a problem's folder): the same characters and '/'.
SAFE_PATH_RE = re.compile(r"[A-Za-z0-9._/-]{1,255}")
# git's own folder (or, in a worktree, the file naming it): its config can hold a token, its objects every branch's.
GIT_DIR = ".git"


def is_safe_name(name: object) -> bool:
    return isinstance(name, str) and SAFE_NAME_RE.fullmatch(name) is not None


def is_safe_path(rel: object) -> bool:
    return isinstance(rel, str) and SAFE_PATH_RE.fullmatch(rel) is not None and ".." not in rel.split("/")


def real_path(path: str | Path) -> Path:
    """`path` with every symbolic link resolved, as `Path.resolve()` gives it, but a link loop (a committed `a -> a`)
    stays a path: opening it then fails with a one-line error, where `resolve()` raised RuntimeError on Python 3.11."""
    return Path(os.path.realpath(path))


def checkout_root(start: str | Path) -> Path:
    """The working tree `start` lies in (the nearest folder above it holding `.git`), else `start`'s folder's
    parent: the boundary a file named from `start` may not leave when no caller gave one."""
    here = Path(start).resolve()
    folder = here if here.is_dir() else here.parent
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder.parent


def resolve_inside(path: str | Path, boundary: str | Path | None, *, named_in: str | Path | None = None,
                   key: str = "") -> Path:
    """`path` resolved (symbolic links included) and checked to lie inside `boundary` (when given). The error
    names `named_in` (the file that named the path) and its `key` where given, else the path itself."""
    text = str(path)
    where = named_in if named_in is not None else path
    prefix = f"{key}: " if key else ""
    if not text or not text.isprintable():  # a NUL or a newline is no file name a checkout should hold
        raise KforgeError(f"{prefix}{ascii(text)[:80]} is not a file name in the checkout", path=where,
                          hint="write the path out plainly")
    resolved = real_path(path)
    if boundary is None:
        return resolved
    inner = real_path(boundary)
    if not resolved.is_relative_to(inner):
        raise KforgeError(f"{prefix}{ascii(text)[:80]} resolves outside the checkout (a '..' or a symbolic link)",
                          path=where, hint="keep every file the repository names inside it")
    if GIT_DIR in resolved.relative_to(inner).parts:
        raise KforgeError(f"{prefix}{ascii(text)[:80]} lies in git's own folder (.git), which holds no file of the "
                          "repository's", path=where, hint="name a file committed to the repository")
    return resolved


def read_bytes(path: str | Path, boundary: str | Path | None = None, *, limit: int = MAX_SOURCE_BYTES,
               named_in: str | Path | None = None, key: str = "") -> bytes:
    """The bytes of a regular file inside `boundary`, at most `limit` of them, or a one-line KforgeError."""
    with _opened(path, boundary, limit, named_in, key) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:  # grew since it was opened
        raise KforgeError(f"{key + ': ' if key else ''}too large (over {limit} bytes): not read", path=path)
    return data


def sha256(path: str | Path, boundary: str | Path | None = None, *, limit: int = MAX_DATA_BYTES) -> str:
    """The SHA-256 of a regular file inside `boundary` (at most `limit` bytes), read in blocks."""
    digest = hashlib.sha256()
    seen = 0
    with _opened(path, boundary, limit, None, "") as handle:
        while block := handle.read(1 << 20):
            seen += len(block)
            if seen > limit:
                raise KforgeError(f"too large (over {limit} bytes): not read", path=path)
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def _opened(path: str | Path, boundary: str | Path | None, limit: int, named_in: str | Path | None,
            key: str) -> Iterator[Any]:
    """A regular file inside `boundary`, of at most `limit` bytes, open for reading in binary."""
    resolved = resolve_inside(path, boundary, named_in=named_in, key=key)
    prefix = f"{key}: " if key else ""
    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer; O_NOFOLLOW: the name was resolved.
        fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise KforgeError(f"{prefix}file not found", path=resolved) from None
    except OSError as exc:
        raise KforgeError(f"{prefix}cannot read: {exc.strerror}", path=resolved) from None
    info = os.fstat(fd)  # the open file's own type: no race between a check of the name and the open
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KforgeError(f"{prefix}not a regular file (a device, FIFO, socket or folder): not read",
                              path=resolved, hint="name a file committed to the repository")
        raise KforgeError(f"{prefix}too large ({info.st_size} bytes, at most {limit}): not read", path=resolved,
                          hint="split it, or remove what is not needed")
    with os.fdopen(fd, "rb") as handle:
        yield handle


def read_text(path: str | Path, boundary: str | Path | None = None, *, limit: int = MAX_SOURCE_BYTES,
              named_in: str | Path | None = None, key: str = "") -> str:
    """The UTF-8 text of a regular file inside `boundary` (see `read_bytes`)."""
    data = read_bytes(path, boundary, limit=limit, named_in=named_in, key=key)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        prefix = f"{key}: " if key else ""
        raise KforgeError(f"{prefix}cannot read: not UTF-8 text (a binary file?)", path=path) from None


def read_yaml(path: str | Path, boundary: str | Path | None = None, *, named_in: str | Path | None = None,
              key: str = "") -> Any:
    """A YAML file's data, read as `read_text` reads (at most MAX_YAML_BYTES) and parsed by the strict loader."""
    return load_yaml_text(read_text(path, boundary, limit=MAX_YAML_BYTES, named_in=named_in, key=key), path)


def is_regular_file(path: str | Path, boundary: str | Path | None = None) -> bool:
    """Whether `path` is a regular file inside `boundary` (links resolved): what `read_bytes` would open."""
    try:
        resolved = resolve_inside(path, boundary)
        return stat.S_ISREG(os.stat(resolved).st_mode)
    except (KforgeError, OSError):
        return False
