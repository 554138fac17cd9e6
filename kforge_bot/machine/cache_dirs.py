"""Where this machine's caches are, decided here alone. One variable, $KFORGE_CACHE_DIR, names the cache folder of
every command: the results at its top, doctor's measured ceilings in `ceilings/`; an Actions cache step may save
and restore it. The workers' bytecode cache (evaluate.bytecode) is the one folder kept outside it, on purpose:
whoever can write bytecode runs code in the bot, so it must never be restored from a shared cache or lie where
$KFORGE_CACHE_DIR points (a checkout, perhaps): $KFORGE_BYTECODE_DIR, else beside it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kforge_bot.errors import KforgeError

ENV_CACHE_DIR = "KFORGE_CACHE_DIR"
ENV_BYTECODE_DIR = "KFORGE_BYTECODE_DIR"
CEILINGS = "ceilings"  # doctor's measured ceilings, a subfolder of the cache folder
# Names no longer read (nothing was released under them): set, they are an error that names the one to use.
REMOVED = {"KFORGE_BOT_CACHE_DIR": ENV_CACHE_DIR}


def _environment(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    env = os.environ if environ is None else environ
    for old, new in REMOVED.items():
        if env.get(old):
            raise KforgeError(f"{old} is no longer read", hint=f"set {new} instead (the same folder), and unset {old}")
    return env


def _xdg_cache(env: Mapping[str, str]) -> Path:
    return Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"


def cache_inside_checkout(directory: str | Path, checkout: str | Path) -> bool:
    """Whether a cache folder lies inside the checkout under test (links resolved): there a pull request can
    commit entries, and anything read back is the pull request's, so the gate never uses one."""
    return Path(directory).expanduser().resolve().is_relative_to(Path(checkout).resolve())


def user_cache_dir(environ: Mapping[str, str] | None = None, *, unset: Path | None = None) -> Path:
    """The one cache folder of every command (results, doctor's ceilings): $KFORGE_CACHE_DIR, else `unset`, else
    $XDG_CACHE_HOME/kforge-bot, else ~/.cache/kforge-bot: a folder an Actions cache step can save and restore
    between runs."""
    env = _environment(environ)
    if env.get(ENV_CACHE_DIR):
        return Path(env[ENV_CACHE_DIR]).expanduser()
    if unset is not None:
        return unset
    return _xdg_cache(env) / "kforge-bot"


def ceilings_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where `kforge-bot doctor --save` keeps this machine's measured ceilings: `ceilings/` of the cache folder."""
    return user_cache_dir(environ) / CEILINGS


def bytecode_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The workers' bytecode cache: $KFORGE_BYTECODE_DIR, else $XDG_CACHE_HOME/kforge-bot-bytecode (beside the cache
    folder, never in it: see this module's docstring)."""
    env = _environment(environ)
    if env.get(ENV_BYTECODE_DIR):
        return Path(os.path.expanduser(env[ENV_BYTECODE_DIR]))
    return _xdg_cache(env) / "kforge-bot-bytecode"
