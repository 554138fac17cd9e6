"""Where this machine's caches are: one variable, $KFORGE_CACHE_DIR, for every command's cache folder."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

ENV_CACHE_DIR = "KFORGE_CACHE_DIR"
OLD_ENV_CACHE_DIR = "KFORGE_BOT_CACHE_DIR"  # its earlier name (doctor's ceilings read it): still read, with a note
_noted_old_name: list[bool] = []


def cache_inside_checkout(directory: str | Path, checkout: str | Path) -> bool:
    """Whether a cache folder lies inside the checkout under test (links resolved): there a pull request can
    commit entries, and anything read back is the pull request's, so the gate never uses one."""
    return Path(directory).expanduser().resolve().is_relative_to(Path(checkout).resolve())


def user_cache_dir(environ: Mapping[str, str] | None = None, *, unset: Path | None = None) -> Path:
    """The one cache folder of every command (results, doctor's ceilings): $KFORGE_CACHE_DIR, else `unset` (the
    gate's: the repository's .kforge-cache), else $XDG_CACHE_HOME/kforge-bot, else ~/.cache/kforge-bot: a folder an
    Actions cache step can save and restore between runs."""
    env = os.environ if environ is None else environ
    chosen = env.get(ENV_CACHE_DIR)
    if not chosen and env.get(OLD_ENV_CACHE_DIR):
        chosen = env[OLD_ENV_CACHE_DIR]
        if not _noted_old_name:
            _noted_old_name.append(True)
            print(f"kforge-bot: note: {OLD_ENV_CACHE_DIR} is deprecated; set {ENV_CACHE_DIR} instead (the same folder)",
                  file=sys.stderr)
            if environ is None:  # children (pool slots, Ray actors, doctor's probes) inherit the new name: one note
                os.environ.setdefault(ENV_CACHE_DIR, chosen)
    if chosen:
        return Path(chosen).expanduser()
    if unset is not None:
        return unset
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "kforge-bot"
