"""Acknowledgements: a maintainer marks a change point as accepted, with a reason. Its level becomes the new normal:
the change point stays in the history, marked, and never alerts again. Each lives on the history ref as its own file
(`acks/<digest>.json`: who, why, when, from where), so concurrent acknowledgements never collide."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.history.changes import change_id

ACK_PREFIX = "acks/"
ID_PATTERN = re.compile(r"^(?P<kernel>[^@\s]+)@(?P<commit>[0-9a-f]{7,40})$")
MAX_REASON = 500


def parse_id(text: str) -> tuple[str, str]:
    """'<kernel>@<commit>' -> (kernel, commit prefix); a clear error otherwise."""
    match = ID_PATTERN.match(text.strip())
    if not match:
        raise KforgeError(f"{text!r} is not a change point's id",
                          hint="give KERNEL@COMMIT as `kforge-bot history` lists it (e.g. softmax@1a2b3c4d5e6f)")
    return match["kernel"], match["commit"]


def ack_path(ident: str) -> str:
    return f"{ACK_PREFIX}{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"


def make_ack(kernel: str, commit: str, by: str, reason: str, via: str) -> dict[str, Any]:
    reason = " ".join(reason.split())
    if not reason:
        raise KforgeError("an acknowledgement needs a reason", hint="say why the new level is accepted (--reason)")
    return {"id": change_id(kernel, commit), "kernel": kernel, "commit": commit, "by": by,
            "reason": reason[:MAX_REASON], "via": via, "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def acks_of(files: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The history's acknowledgements by change point id (the latest one wins)."""
    found = sorted((data for path, data in files.items() if path.startswith(ACK_PREFIX) and isinstance(data, dict)),
                   key=lambda a: str(a.get("at", "")))
    return {str(a["id"]): a for a in found if "id" in a}
