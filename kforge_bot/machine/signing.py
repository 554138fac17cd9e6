"""This machine's signing key and the signatures it makes: what the bot writes into a cache folder (results,
doctor's ceilings) is signed, and read back only if this machine signed it, as a workflow may restore the folder
from a shared cache or point it into a checkout."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kforge_bot.config import signer
from kforge_bot.errors import KforgeError

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


def signature(secret: bytes | None, record: Mapping[str, Any]) -> str:
    """HMAC-SHA256 of the record's canonical JSON with `secret`, or (None) this machine's key, through the signer."""
    blob = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")
    if secret is None:
        return signer.mac(blob, machine_secret)
    return hmac.new(secret, blob, hashlib.sha256).hexdigest()


def sign(record: Mapping[str, Any]) -> str:
    """This machine's signature of a record written into the cache folder (which a workflow may restore from a
    shared cache, or point into a checkout): what is read back must be what this machine wrote."""
    return signature(None, record)


def signed_here(record: Mapping[str, Any], signature: Any) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(signature, sign(record))
