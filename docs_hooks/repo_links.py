"""MkDocs hook: `repo:PATH` links in docs/ pages become links to PATH in the repository at `repo_url`.

The repository's address is set once, as mkdocs.yml's `repo_url`; pages name files of the repository by their
path (`[SECURITY.md](repo:SECURITY.md)`, `[examples](repo:examples/)`), and tests/test_docs.py checks that each
path exists in the checkout."""

from __future__ import annotations

import re
from typing import Any

REPO_LINK = re.compile(r"\]\(repo:([^)\s]*)\)")


def repo_address(repo_url: str, path: str) -> str:
    """README.md (with or without an anchor) is the repository's front page; a folder ends with '/'."""
    base = repo_url.rstrip("/")
    file, _, anchor = path.partition("#")
    if file in ("", "README.md"):
        return base + (f"#{anchor}" if anchor else "")
    kind = "tree" if file.endswith("/") else "blob"
    return f"{base}/{kind}/main/{file}" + (f"#{anchor}" if anchor else "")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return REPO_LINK.sub(lambda m: f"]({repo_address(config['repo_url'], m.group(1))})", markdown)
