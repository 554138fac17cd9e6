"""The names of the files a reference's worker records for a head's worker that imports none of the base's files
(Plan.ship_inputs; evaluate.worker.shipped_inputs records and reads them, evaluate.shipping hands them over).

One input set per (seed, keywords, context); the constructor's arguments and the reference's weights per context
(the listed sizes, or a held-out form's); the fingerprint of the reference's forward. A name the head's worker asks
for that is not of these forms is refused before any path is made from it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kforge_bot.evaluate.wire.heldout import Variant

FOLDER = "shipped"  # under the reference's out_dir; the parent keeps it for the heads (evaluate.references)
INBOX = "inbox"  # the folder of a worker's scratch its sandbox shows read-only: where the parent hands a file over
LISTED = "listed"  # the listed sizes' context; a held-out form's is form_context(form)
FORWARD = "forward.pt"
_NAME = re.compile(r"(in-[0-9a-f]{32}|(init|state)-(listed|form-[0-9a-f]{16})|forward)\.pt")


def inputs_name(seed: int, kwargs: dict[str, Any], context: str = LISTED) -> str:
    """One input set's file: its seed, the keywords the inputs callable got (the device aside) and the context: a
    KernelBench file's held-out forms move module globals, not keywords, and share their variant's seed."""
    material = json.dumps([seed, {k: v for k, v in kwargs.items() if k != "device"}, context], sort_keys=True,
                          default=str)
    return f"in-{hashlib.sha256(material.encode()).hexdigest()[:32]}.pt"


def init_name(context: str) -> str:
    return f"init-{context}.pt"


def state_name(context: str) -> str:
    return f"state-{context}.pt"


def form_context(form: Variant) -> str:
    """A held-out form's context. The forms of one variant share its seed and are tried in turn until the reference
    runs one: named by the seed alone, a form after a failed one recorded its sizes under the failed one's names,
    and on a GPU the head got the first form's tensors in the second's skeleton (KernelBench L2 1 and 76 on an
    H100: "the handed-over tensors do not match")."""
    data = form.to_dict()  # as it crosses to the head's worker and back
    material = json.dumps([data[k] for k in ("seed", "sizes", "where", "values")], sort_keys=True, default=str)
    return f"form-{hashlib.sha256(material.encode()).hexdigest()[:16]}"


def skeleton_name(name: str) -> str:
    """The recorded file of a value whose tensors travel as device memory: the value with meta tensors in their
    place (evaluate.wire.shipped_device)."""
    return f"{name}.skeleton"


def why_name(name: str) -> str:
    """Where the reference's worker says why it could not record `name` (a value that cannot travel as data)."""
    return f"{name}.why"


def valid_name(name: object) -> bool:
    return isinstance(name, str) and _NAME.fullmatch(name) is not None
