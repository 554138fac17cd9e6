"""A content-addressed cache of gate results: a directory of JSON files (fits the Actions cache).

A kernel's result is reused only when everything that could change it is byte-for-byte the same:
the kernel file and every local file it imports (transitively, on both the base and the head side),
the reference and input sources, the manifest's settings for the kernel, the policy rule it was
judged by, the evaluation settings, the target (device name, torch version) and the harness version
(`kforge_bot.HARNESS_VERSION`). The key is the SHA-256 of that material; nothing else (paths of
temporary checkouts, dates, seeds) goes in, so two runs on the same content share a key.

"Local" means every file under the repository root the kernel can read: what it imports, includes, builds
and opens, and the whole folder where that cannot be resolved statically (kforge_bot.kernelspec.dependencies, the one
function the gate's "changed" check uses too).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kforge_bot import HARNESS_VERSION
from kforge_bot.config import reader
from kforge_bot.errors import KforgeError
from kforge_bot.machine.signing import signature
from kforge_bot.kernelspec.dependencies import local_closure
from kforge_bot.targets.fingerprint import TargetFingerprint

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


# -------------------------------------------------------------------------------------------- store


def cache_key(material: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of `material` plus the harness version."""
    blob = json.dumps({"harness_version": HARNESS_VERSION, **material}, sort_keys=True, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


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
        if not isinstance(mac, str) or not hmac.compare_digest(mac, signature(self._secret, data)):
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
        record["mac"] = signature(self._secret, record)
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
