"""A content-addressed cache of gate results: a directory of JSON files (fits the Actions cache).

A kernel's result is reused only when everything that could change it is byte-for-byte the same:
the kernel file and every local file it imports (transitively, on both the base and the head side),
the reference and input sources, the manifest's settings for the kernel, the policy rule it was
judged by, the evaluation settings, the target (device name, torch version) and the harness version
(`kforge_bot.HARNESS_VERSION`). The key is the SHA-256 of that material; nothing else (paths of
temporary checkouts, dates, seeds) goes in, so two runs on the same content share a key.

"Local" means every file under the repository root the kernel can read: what it imports, includes, builds
and opens, and the whole folder where that cannot be resolved statically (kforge_bot.spec.dependencies, the one
function the gate's "changed" check uses too).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from kforge_bot import HARNESS_VERSION
from kforge_bot.config import signer
from kforge_bot.config import reader
from kforge_bot.environment import scrubbed_environment
from kforge_bot.errors import KforgeError
from kforge_bot.spec.dependencies import local_closure
from kforge_bot.targets import cpu_model

DEFAULT_DIR = ".kforge-cache"


def file_digests(paths: Iterable[Path], repo_root: Path) -> dict[str, str]:
    """Repository-relative POSIX path -> SHA-256 of the bytes ("missing" for a file that is not there)."""
    repo_root = repo_root.resolve()
    out: dict[str, str] = {}
    for path in paths:
        path = reader.real_path(path)  # a committed link loop stays a path: "missing" below, no crash
        rel = path.relative_to(repo_root).as_posix() if path.is_relative_to(repo_root) else str(path)
        try:  # through the reader: a link out of the checkout, a device or a FIFO is not read
            out[rel] = reader.sha256(path, repo_root)
        except KforgeError:
            out[rel] = "missing"
    return dict(sorted(out.items()))


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def portable(data: Any) -> Any:
    """Spec/implementation data with machine-specific parts removed: `root` directories (and the absolute import
    roots, `paths`: the spec keeps them relative) are dropped and `source` texts become their digests, so a
    checkout's location never changes a key."""
    if isinstance(data, Mapping):
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key in ("root", "paths"):
                continue
            out[key] = text_digest(value) if key == "source" and isinstance(value, str) else portable(value)
        return out
    if isinstance(data, (list, tuple)):
        return [portable(v) for v in data]
    return data


# ------------------------------------------------------------------------------------------ targets


@dataclass(frozen=True)
class TargetFingerprint:
    """What a timing depends on besides the code: the device kind and model, and torch's version."""

    kind: str
    device_name: str
    torch_version: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "not installed"


_PROBE = """
import json, sys, torch
kind = sys.argv[1]
module = getattr(torch, kind)
print(json.dumps({"name": module.get_device_name(0), "torch": torch.__version__}))
"""


def probe_fingerprint(kind: str) -> TargetFingerprint:
    """The fingerprint of this machine's `kind` device. GPUs are asked in a child process, so the
    gate's own process never holds a device context while kernels are measured."""
    if kind == "cpu":
        return TargetFingerprint("cpu", cpu_model(), _torch_version())
    if kind == "mps":
        return TargetFingerprint("mps", "Apple GPU (" + (os.uname().machine if hasattr(os, "uname") else "?") + ")",
                                 _torch_version())

    proc = subprocess.run([sys.executable, "-c", _PROBE, kind], check=False, capture_output=True, text=True, timeout=300,
                          env=scrubbed_environment())
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise KforgeError(f"cannot read the {kind} device's name: {tail}",
                          hint="run `kforge-bot doctor` to see what this machine offers")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return TargetFingerprint(kind, data["name"], data["torch"])


# -------------------------------------------------------------------------------------------- store


def cache_key(material: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of `material` plus the harness version."""
    blob = json.dumps({"harness_version": HARNESS_VERSION, **material}, sort_keys=True, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


ENV_CACHE_SECRET = signer.ENV_CACHE_SECRET


def machine_secret(environ: Mapping[str, str] | None = None) -> bytes:
    """The key that signs this machine's cache entries: $KFORGE_CACHE_SECRET, else a random key made once in
    `~/.config/kforge-bot/cache-secret` (mode 600). Workers never see it: the sandbox hides ~/.config, and
    the scrubbed environment drops every *SECRET* variable. In the CLI only the signer process calls this
    (kforge_bot.config.signer): the bot asks it for signatures."""
    env = os.environ if environ is None else environ
    if env.get(ENV_CACHE_SECRET):
        return env[ENV_CACHE_SECRET].encode("utf-8")
    base = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    path = base / "kforge-bot" / "cache-secret"
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Written whole, then linked into place: a process racing this one reads a complete key or none.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cache-secret-")  # mode 600
            try:
                with os.fdopen(fd, "w", encoding="ascii") as handle:
                    handle.write(secrets.token_hex(32))
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process made it first
            finally:
                os.unlink(tmp)
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except OSError as exc:
        raise KforgeError(f"cannot create the cache's signing key: {exc.strerror}", path=path,
                          hint=f"make {path.parent} writable, or set {ENV_CACHE_SECRET}") from None
    except ValueError:
        raise KforgeError("the cache's signing key is not a hex key", path=path,
                          hint="delete it (a new one is made, and the entries it signed are measured again)") from None


def _signature(secret: bytes | None, record: Mapping[str, Any]) -> str:
    """HMAC-SHA256 of the record's canonical JSON with `secret`, or (None) this machine's key, through the signer."""
    blob = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")
    if secret is None:
        return signer.mac(blob, machine_secret)
    return hmac.new(secret, blob, hashlib.sha256).hexdigest()


def sign(record: Mapping[str, Any]) -> str:
    """This machine's signature of a record written into the cache folder (which a workflow may restore from a
    shared cache, or point into a checkout): what is read back must be what this machine wrote."""
    return _signature(None, record)


def signed_here(record: Mapping[str, Any], signature: Any) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(signature, sign(record))


MAX_ENTRY_BYTES = reader.MAX_SOURCE_BYTES  # an entry is a report's JSON: far smaller


def _write_new(path: Path, text: str) -> None:
    """Create `path` with `text` unless something is there, a link included (a dangling one planted in a restored
    cache folder would otherwise be followed, and the file made wherever it points)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


class ResultCache:
    """`<dir>/<key>.json`, written atomically and signed with this machine's key (HMAC-SHA256): an entry is
    used only if it verifies, so one written by anyone but the bot on this machine (a worker, a pull
    request's workflow step that planted files in a shared Actions cache, another machine) is a miss, and
    is listed in `rejected`. Unreadable files count as misses too."""

    def __init__(self, directory: str | Path, secret: bytes | None = None) -> None:
        self.directory = Path(directory)
        self._secret = secret  # None: this machine's key, held by the signer process (kforge_bot.config.signer)
        self.rejected: list[str] = []  # entries that failed authentication, for the report

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:  # through the reader: a planted link (to /dev/zero), FIFO or huge file is a miss, never read or waited on
            data = json.loads(reader.read_text(self.path(key), self.directory, limit=MAX_ENTRY_BYTES))
        except (KforgeError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("key") != key or data.get("harness_version") != HARNESS_VERSION:
            return None
        mac = data.pop("mac", None)
        if not isinstance(mac, str) or not hmac.compare_digest(mac, _signature(self._secret, data)):
            self.rejected.append(str(self.path(key)))
            return None
        payload = data.get("result")
        return payload if isinstance(payload, dict) else None

    def put(self, key: str, material: Mapping[str, Any], result: Mapping[str, Any]) -> Path:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            _write_new(self.directory / ".gitignore", "# kforge-bot's result cache: not for version control\n*\n")
        except OSError as exc:
            raise KforgeError(f"cannot create the cache directory: {exc.strerror}", path=self.directory,
                              hint="pass a writable --cache-dir") from None
        record = {"key": key, "harness_version": HARNESS_VERSION, "material": material, "result": dict(result)}
        record = json.loads(json.dumps(record, default=str))  # the signature covers what a reader will parse
        record["mac"] = _signature(self._secret, record)
        text = json.dumps(record, indent=1, sort_keys=True, default=str)
        # Written beside the target and renamed: a reader (or a cache upload) never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, self.path(key))
        except OSError:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.path(key)

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("*.json")) if self.directory.is_dir() else 0


# ------------------------------------------------------------------------------- optimize's evaluations

# Verdicts that follow from the code, its inputs, the harness and the device alone. Crashes and timeouts can
# be the machine's fault (a busy GPU, an OOM killer) and are measured again.
EVAL_CACHEABLE = ("pass", "incorrect", "rejected")
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


def evaluation_material(spec: Any, candidate: Any, settings: Any, fingerprint: TargetFingerprint,
                        baseline: Any = None) -> dict[str, Any]:
    """What one evaluation's verdict and timing depend on: the spec (its reference, inputs and shape sets)
    and every local file the kernel imports, the candidate's source, the baseline it is timed against, the
    evaluation settings and the target. Seeds are left out: fresh seeds each time are the point."""
    root = Path(spec.root)
    entry = [root / spec.entry_file] if getattr(spec, "entry_file", "") else []
    local = file_digests(local_closure([spec.kernel_path, *entry], spec.source_roots, root), root)
    return {"kind": "evaluation", "spec": portable(spec.to_dict()), "local_files": local,
            "candidate": portable(candidate.to_dict()),
            "baseline": portable(baseline.to_dict()) if baseline is not None else "spec baseline",
            "settings": settings.key_material(), "target": fingerprint.to_dict()}
