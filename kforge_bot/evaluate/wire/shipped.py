"""The names of the files a reference's worker records for a head's worker that imports none of the base's files
(Plan.ship_inputs; evaluate.worker.shipped_inputs records and reads them, evaluate.shipping hands them over).

One input set per (seed, keywords); the constructor's arguments and the reference's weights per context (the listed
sizes, or a held-out form's); the fingerprint of the reference's forward. A name the head's worker asks for that is
not of these forms is refused before any path is made from it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

FOLDER = "shipped"  # under the reference's out_dir; the parent keeps it for the heads (evaluate.references)
INBOX = "inbox"  # the folder of a worker's scratch its sandbox shows read-only: where the parent hands a file over
LISTED = "listed"  # the listed sizes' context; a held-out form's is form_context(its seed)
FORWARD = "forward.pt"
_NAME = re.compile(r"(in-[0-9a-f]{32}|init-(listed|form-[0-9]{1,20})|state-(listed|form-[0-9]{1,20})|forward)\.pt")


def inputs_name(seed: int, kwargs: dict[str, Any]) -> str:
    """One input set's file: its seed and the keywords the inputs callable got (the device aside)."""
    material = json.dumps([seed, {k: v for k, v in kwargs.items() if k != "device"}], sort_keys=True, default=str)
    return f"in-{hashlib.sha256(material.encode()).hexdigest()[:32]}.pt"


def init_name(context: str) -> str:
    return f"init-{context}.pt"


def state_name(context: str) -> str:
    return f"state-{context}.pt"


def form_context(seed: int) -> str:
    return f"form-{seed}"


def skeleton_name(name: str) -> str:
    """The recorded file of a value whose tensors travel as device memory: the value with meta tensors in their
    place (evaluate.wire.shipped_device)."""
    return f"{name}.skeleton"


def why_name(name: str) -> str:
    """Where the reference's worker says why it could not record `name` (a value that cannot travel as data)."""
    return f"{name}.why"


def valid_name(name: object) -> bool:
    return isinstance(name, str) and _NAME.fullmatch(name) is not None
