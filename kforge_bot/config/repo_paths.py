"""Repository paths as policies name them: normalized to forward slashes, matched by .gitignore-like globs."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import PurePosixPath

def normalize_path(path: str) -> str:
    p = str(PurePosixPath(str(path).replace("\\", "/")))
    return p[2:] if p.startswith("./") else p


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    # .gitignore-like: a pattern without "/" matches a file name at any depth; "**" spans directories.
    if "/" not in pattern.rstrip("/"):
        pattern = "**/" + pattern
    out, i, n = [], 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                out.append(re.escape("["))
                i += 1
            else:
                body = pattern[i + 1:j]
                body = "^" + body[1:] if body.startswith("!") else body
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = j + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + "(?:/.*)?\\Z")


def path_matches(pattern: str, path: str) -> bool:
    """Glob match of a repository-relative path: `*` within a directory, `**` across
    directories, a pattern without `/` matches the file name at any depth, and a pattern
    naming a directory matches everything below it."""
    return _glob_regex(pattern).match(normalize_path(path)) is not None
