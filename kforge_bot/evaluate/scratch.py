"""Workers' scratch folders: where they go (memory-backed storage where the machine has it), and their removal
whatever the code run inside did to them."""

from __future__ import annotations

import collections
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

from kforge_bot.errors import KforgeError


def scratch_root() -> Path:
    # Outputs travel as files: keep them in memory-backed storage where the machine has it.
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base


def remove_scratch(folder: Path) -> None:
    """Remove a worker's scratch folder whatever its code did inside it: folders it made unreadable or
    unwritable (`chmod 000`) get their owner's permissions back first (the sandbox's user is this user, so they
    are ours). Links are removed, never followed. A folder that cannot be removed is an error naming it: one
    left behind in /dev/shm holds the machine's memory, evaluation after evaluation."""
    if not os.path.lexists(folder):
        return
    if not os.path.islink(folder):
        try:
            _loosen(Path(folder))
        except OSError:
            pass  # rmtree below reports what stays
    try:
        shutil.rmtree(folder)
    except (OSError, RecursionError) as exc:
        raise KforgeError(f"cannot remove a worker's scratch folder: {exc}", path=folder,
                          hint="remove it by hand (it may hold a lot of memory under /dev/shm) and report this "
                               "as a kforge-bot bug") from None


_FLAT_DEPTH = 32  # rmtree recurses once a folder level (Python < 3.13): deeper folders are moved up first


def _loosen(folder: Path) -> None:
    """Give every folder below `folder` its owner's permissions back, and move each one deeper than _FLAT_DEPTH up
    into `folder`. By file descriptors, in a loop: a candidate may nest folders past PATH_MAX (a `chdir` at a time)
    and deeper than the interpreter's stack."""
    os.chmod(folder, 0o700)
    top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    stack = [(top, collections.deque(os.listdir(top)))]
    try:
        while stack:
            fd, names = stack[-1]
            if not names:
                stack.pop()
                if fd != top:
                    os.close(fd)
                continue
            name = names.popleft()
            try:
                if not stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    continue
                os.chmod(name, 0o700, dir_fd=fd)
                if len(stack) > _FLAT_DEPTH:
                    moved = f".kforge-moved-{secrets.token_hex(8)}"
                    os.rename(name, moved, src_dir_fd=fd, dst_dir_fd=top)
                    stack[0][1].append(moved)  # walked again from the top
                    continue
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    stack.append((child, collections.deque(os.listdir(child))))
                except OSError:
                    os.close(child)
                    raise
            except OSError:
                continue  # rmtree reports what stays
    finally:
        for fd, _ in stack[1:]:
            os.close(fd)
        os.close(top)
