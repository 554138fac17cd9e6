"""The facts of the runner a record is measured on, and the key of its series: a series never mixes machines, and
says where the software under it (driver, torch, Triton, the harness) changed."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

from kforge_bot import HARNESS_VERSION, __version__
from kforge_bot.hardware import facts_for
from kforge_bot.targets.fingerprint import probe_fingerprint

# What may change under a series without making it another machine's; the history marks each change.
SOFTWARE = ("driver", "torch", "triton", "harness")


@dataclass(frozen=True)
class Runner:
    kind: str  # cpu, cuda, xpu, mps
    device: str
    runner_class: str  # kforge_bot/data/runners' name for the device (h200, cpu, ...), else "unknown"
    driver: str
    torch: str
    triton: str
    python: str
    harness: str
    kforge_bot: str

    @property
    def key(self) -> str:
        """The series' machine: runner class and device, as a file-name-safe slug."""
        return slug(f"{self.kind}-{self.runner_class}-{self.device}")

    def software(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in SOFTWARE}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Runner:
        return cls(**{name: str(data.get(name, "")) for name in cls.__dataclass_fields__})


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _driver(kind: str) -> str:
    """The GPU driver's version (nvidia-smi's), or 'none' for the CPU."""
    if kind != "cuda":
        return "none" if kind == "cpu" else "unknown"
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return "unknown"
    proc = subprocess.run([tool, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                          text=True, check=False, timeout=60)
    return (proc.stdout.strip().splitlines() or ["unknown"])[0] if proc.returncode == 0 else "unknown"


def probe_runner(kind: str) -> Runner:
    """This machine's facts for the `kind` device (asked in a child process for a GPU, as the gate asks)."""
    fp = probe_fingerprint(kind)
    facts = facts_for(kind, fp.device_name)
    return Runner(kind=kind, device=fp.device_name, runner_class=facts.name if facts else "unknown",
                  driver=_driver(kind), torch=fp.torch_version, triton=_version("triton"),
                  python=platform.python_version(), harness=HARNESS_VERSION, kforge_bot=__version__)
