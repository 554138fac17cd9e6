"""Whether this machine lets the bot write a file or use a folder, asked before the work that ends in writing it:
an hour of measurements must not end in "cannot write here"."""

from __future__ import annotations

import os
from pathlib import Path

from kforge_bot.errors import KforgeError


def write_refusal(path: Path, what: str, hint: str) -> KforgeError | None:
    """Why `what` could not be written as the file `path` (None: it can), found before any work: the nearest folder
    that exists must be a folder this user may write and enter, and an existing file one it may write."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return KforgeError(f"cannot write {what}: {folder} is not a folder", path=path, hint=hint)
    if path.is_dir():
        return KforgeError(f"cannot write {what}: it is a folder", path=path, hint=hint)
    if not os.access(path if path.exists() else folder, os.W_OK) or not os.access(folder, os.X_OK):
        return KforgeError(f"cannot write {what} here: no permission", path=path, hint=hint)
    return None


def folder_refusal(folder: Path, what: str, hint: str) -> KforgeError | None:
    """Why `folder` could not hold `what` (None: it can): an existing one must be a folder this user may read,
    write and enter; a new one, creatable in the nearest folder that exists."""
    if folder.exists() and not folder.is_dir():
        return KforgeError(f"cannot use it for {what}: it is not a folder", path=folder, hint=hint)
    if folder.exists():
        if not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
            return KforgeError(f"cannot use it for {what}: no permission to read and write it", path=folder, hint=hint)
        return None
    return write_refusal(folder, what, hint)
