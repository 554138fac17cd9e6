"""Compiled bytecode for sandboxed workers, where the Python installation ships none.

Every worker is a fresh interpreter that imports torch. Where torch was installed without its `.pyc` files
(`pip install --no-compile`, or a container image built with PYTHONDONTWRITEBYTECODE=1, as many are) and
nothing may write them (workers run with PYTHONDONTWRITEBYTECODE=1 on a read-only system), each worker
compiles torch's Python source from scratch: 3.1-5.2 s of a worker's start on the H200 runner image,
against 1.4-2.2 s with this cache there.

So the bot keeps a bytecode cache of its own (PYTHONPYCACHEPREFIX, a tree that mirrors the source paths),
filled once per machine by a trusted process that imports what a worker imports (torch, the harness,
triton, torch.compile's modules) and nothing else, with no credentials in its environment. Workers see it
read-only at a fixed path inside the sandbox, so no candidate can write bytecode that a later evaluation
would run. Python checks each cached file against its source's size and time, so a stale entry costs a
compile, never a wrong module. Unsandboxed workers (policy isolation: off) never get it: there nothing
would stop a candidate from writing into it.

Whoever can write the cache can run code in every worker and in the bot, so it is used only where nobody
else can: an absolute path, a real folder (not a link) owned by this user and writable by nobody else, every
folder above it owned by this user or root and, if others may write there, sticky (as /tmp is). It lives
beside the result cache, not inside it (`~/.cache/kforge-bot` is what docs/scaling.md has Actions cache and
restore across runs). The filling process starts in an empty folder of its own and says which harness it
imported, so nothing in the cache's folder or the current one is imported in its place.

KFORGE_BYTECODE: `auto` (the default: only where torch has no bytecode beside its source), `on`, `off`.
KFORGE_BYTECODE_DIR: where the cache lives, an absolute path (default: $XDG_CACHE_HOME/kforge-bot-bytecode;
kforge_bot.machine.cache_dirs decides it).
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import importlib.util
import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kforge_bot.machine.cache_dirs import bytecode_dir

MOUNT = "/run/kforge-bytecode"  # where a sandboxed worker sees the cache (its /run is a fresh tmpfs)
MODES = ("auto", "on", "off")
PRIME_TIMEOUT_S = 600.0
# What a worker may import beyond its boot: the candidate's toolchains. Each is tried; a missing one is skipped.
_LATER_IMPORTS = ("torch.profiler", "torch.utils.cpp_extension", "triton", "triton.language",
                  "torch._dynamo", "torch._inductor.compile_fx")
_PRIME = f"""
import importlib
import kforge_bot.evaluate.worker.entry  # torch and the harness: everything a worker's start imports
for name in {_LATER_IMPORTS!r}:
    try:
        importlib.import_module(name)
    except Exception:
        pass
print(kforge_bot.evaluate.worker.entry.__file__)
"""
# Packages whose versions go in the cache's key: another version fills it again (their modules stale otherwise).
_KEYED = ("torch", "triton", "numpy", "sympy", "kforge-bot")
_KEPT_KEYS = 8


@dataclass(frozen=True)
class Bytecode:
    """Where workers' bytecode comes from: `directory` is the bot's cache to show them, or None."""

    directory: Path | None
    source: str  # "installation", "kforge-bot cache", "compiled at every start (...)"
    primed_s: float | None = None  # this process filled the cache, or waited for another to, this long

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {"source": self.source}
        if self.directory is not None:
            out["directory"] = str(self.directory)
        if self.primed_s is not None:
            out["primed_s"] = self.primed_s
        return out


def mode() -> str:
    value = os.environ.get("KFORGE_BYTECODE", "auto").strip().lower() or "auto"
    return value if value in MODES else "auto"


def unsafe_reason(directory: Path) -> str | None:
    """Why `directory` may not serve as the cache (someone else could write it), or None where it may."""
    if not directory.is_absolute():
        return f"{directory} is not an absolute path"
    uid = os.getuid()
    try:
        info = os.lstat(directory)
    except OSError as exc:
        return f"{directory}: {exc.strerror}"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a folder (a link, or a file)"
    if info.st_uid != uid or info.st_mode & 0o022:
        return f"{directory} is owned by uid {info.st_uid} or writable by others (mode {info.st_mode & 0o777:o})"
    for parent in directory.parents:
        try:
            above = os.stat(parent)
        except OSError as exc:
            return f"{parent}: {exc.strerror}"
        if above.st_uid not in (0, uid):
            return f"{parent} is owned by uid {above.st_uid}"
        if above.st_mode & 0o022 and not above.st_mode & stat.S_ISVTX:
            return f"{parent} is writable by others and not sticky"
    return None


def installation_has_bytecode(package: str = "torch") -> bool:
    """Whether `package` was installed with its compiled files beside its source (what pip does by default)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True  # nothing to compile, or not Python source: the cache would not help
    folder, name = os.path.split(spec.origin)
    return os.path.exists(os.path.join(folder, "__pycache__", f"{name[:-3]}.{sys.implementation.cache_tag}.pyc"))


def _key() -> str:
    """What the cache was filled for: this interpreter, this torch and the versions of what workers import."""
    spec = importlib.util.find_spec("torch")
    origin = spec.origin if spec is not None else ""
    try:
        stamp = os.stat(origin).st_mtime_ns if origin else 0
    except OSError:
        stamp = 0
    versions = []
    for name in _KEYED:
        try:
            versions.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name}=-")
    return " ".join([sys.implementation.cache_tag, os.path.realpath(sys.executable), origin, str(stamp), *versions])


def _primed(directory: Path) -> bool:
    try:
        return _key() in json.loads((directory / "primed.json").read_text()).get("keys", [])
    except (OSError, ValueError, AttributeError):
        return False


def prime(directory: Path, environ: dict[str, str], timeout_s: float = PRIME_TIMEOUT_S) -> float:
    """Fill `directory` with the bytecode of what a worker imports; returns the seconds it took (waiting for
    another process's filling included). Raises OSError or RuntimeError when it cannot, or when the folder is
    not safe (`unsafe_reason`). Only trusted code runs: the installation's packages and the harness."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    problem = unsafe_reason(directory)
    if problem:
        raise RuntimeError(f"the bytecode cache's folder is not safe to use: {problem}")
    started = time.monotonic()
    lock = os.open(directory / ".lock", os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another bot process filling it: wait, then find it filled
        if not _primed(directory):
            _fill(directory, environ, timeout_s)
    finally:
        os.close(lock)
    return round(time.monotonic() - started, 2)


def _fill(directory: Path, environ: dict[str, str], timeout_s: float) -> None:
    env = {k: v for k, v in environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(directory)
    expected = importlib.util.find_spec("kforge_bot.evaluate.worker.entry")
    # An empty folder of its own: `-c` searches the current folder first, and nothing may be found there.
    with tempfile.TemporaryDirectory(prefix="kforge-bytecode-fill-") as empty:
        proc = subprocess.run([sys.executable, "-c", _PRIME], cwd=empty, env=env, capture_output=True,
                              text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise RuntimeError(f"filling the bytecode cache failed: {tail[:300]}")
    imported = (proc.stdout.strip().splitlines() or [""])[-1]
    if expected is None or os.path.realpath(imported) != os.path.realpath(str(expected.origin)):
        raise RuntimeError(f"filling the bytecode cache imported the harness from {imported!r}, not "
                           f"{expected.origin if expected else 'this one'}")
    try:
        keys = json.loads((directory / "primed.json").read_text()).get("keys", [])
    except (OSError, ValueError, AttributeError):
        keys = []
    record = {"keys": [*[k for k in keys if isinstance(k, str)][-(_KEPT_KEYS - 1):], _key()],
              "filled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    handle, partial = tempfile.mkstemp(dir=directory, prefix=".primed-", suffix=".json")
    with os.fdopen(handle, "w") as out:
        json.dump(record, out)
    os.replace(partial, directory / "primed.json")


_lock = threading.Lock()
_chosen: Bytecode | None = None


def for_workers(environ: dict[str, str]) -> Bytecode:
    """The bytecode source for this process's sandboxed workers, decided (and the cache filled) once. The bot's
    own later imports read the cache too: it imports torch to compare outputs while the workers start, and on
    the H200 image that import (3.5-4 s from source) outlasted a worker's start from the cache (1.4-2.2 s)."""
    global _chosen
    with _lock:
        if _chosen is None:
            _chosen = _choose(environ)
            _adopt(_chosen)
        return _chosen


def _adopt(chosen: Bytecode) -> None:
    # Only before torch is imported here, and never over a prefix the user chose (PYTHONPYCACHEPREFIX).
    if chosen.directory is not None and sys.pycache_prefix is None and "torch" not in sys.modules:
        sys.pycache_prefix = str(chosen.directory)


def _choose(environ: dict[str, str]) -> Bytecode:
    chosen = mode()
    if chosen == "off":
        return Bytecode(None, "compiled at every start (KFORGE_BYTECODE=off)")
    if chosen == "auto" and installation_has_bytecode():
        return Bytecode(None, "installation")
    directory = bytecode_dir()
    if directory.exists() and not unsafe_reason(directory) and _primed(directory):
        return Bytecode(directory, "kforge-bot cache")
    try:
        seconds = prime(directory, environ)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        print(f"kforge-bot: warning: workers compile torch at every start ({exc}); fix: set KFORGE_BYTECODE_DIR "
              f"to an absolute path of a folder only this user can write (or its parent), or KFORGE_BYTECODE=off",
              file=sys.stderr)
        return Bytecode(None, f"compiled at every start ({str(exc)[:200]})")
    print(f"kforge-bot: the workers' bytecode cache {directory} is ready ({seconds:.1f} s, once per machine)",
          file=sys.stderr)
    return Bytecode(directory, "kforge-bot cache", primed_s=seconds)


def reset() -> None:
    """Decide again at the next worker (tests change the environment between cases)."""
    global _chosen
    with _lock:
        _chosen = None
