"""The fingerprint of a target on this machine: what a timing depends on besides the code (the device's kind and
model, torch's version). A cached result is reused only on the same fingerprint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from importlib import metadata

from kforge_bot.environment import scrubbed_environment
from kforge_bot.errors import KforgeError
from kforge_bot.targets import cpu_model


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
