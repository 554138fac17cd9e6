"""The devices an evaluation pool's slots go on, and how a slot is pinned to one (the kind's visibility
variable: CUDA_VISIBLE_DEVICES=i, ZE_AFFINITY_MASK=i)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from kforge_bot.errors import KforgeError

VISIBILITY = {"cuda": "CUDA_VISIBLE_DEVICES", "xpu": "ZE_AFFINITY_MASK"}


@dataclass(frozen=True)
class Device:
    """One slot's device: `visible` is the value of the kind's visibility variable ('' on the CPU)."""

    kind: str
    visible: str
    name: str = ""
    capability: str = ""  # "9.0" on CUDA: TORCH_CUDA_ARCH_LIST for builds made ahead

    def describe(self) -> str:
        var = VISIBILITY.get(self.kind)
        where = f"{var}={self.visible}" if var else "host CPU"
        return f"{self.name or self.kind} ({where})"


_DISCOVER = r"""
import json, sys, torch
kind = sys.argv[1]
module = getattr(torch, kind)
rows = []
for i in range(module.device_count()):
    cap = ""
    if kind == "cuda":
        major, minor = torch.cuda.get_device_capability(i)
        cap = f"{major}.{minor}"
    rows.append([module.get_device_name(i), cap])
print("KFORGE_DEVICES " + json.dumps(rows), flush=True)
"""


def discover_devices(kind: str, requested: int | None = None, *, environ: dict[str, str] | None = None) -> list[Device]:
    """The devices slots go on. GPUs: every visible device of the first device's model (mixing models would
    mix timings), asked in a child process so the bot never holds a device context. CPU (and MPS): one
    slot unless `requested` says more, since timing runs on shared cores disturb each other."""
    env = dict(os.environ if environ is None else environ)
    if kind not in VISIBILITY:
        count = requested or 1
        return [Device(kind, "", f"{kind} slot {i}") for i in range(count)]
    rows = _query_devices(kind, env)
    var = VISIBILITY[kind]
    listed = [v.strip() for v in env.get(var, "").split(",") if v.strip()] if env.get(var) else []
    devices = []
    for i, (name, cap) in enumerate(rows):
        visible = listed[i] if i < len(listed) else str(i)
        devices.append(Device(kind, visible, name, cap))
    if not devices:
        raise KforgeError(f"no {kind} device is visible to this process",
                          hint="run `kforge-bot doctor`, or pick another --target")
    same = [d for d in devices if d.name == devices[0].name]
    if requested is not None:
        if requested > len(same):
            raise KforgeError(f"{requested} evaluation slots asked for, but this machine has {len(same)} "
                              f"{devices[0].name} device(s); two timing runs must never share one",
                              hint=f"use --workers {len(same)} or fewer")
        same = same[:requested]
    return same


def _query_devices(kind: str, env: dict[str, str]) -> list[tuple[str, str]]:
    # Not at the top: a slot imports this module before it pins its device, and loads evaluate's modules after.
    from kforge_bot.environment import scrubbed_environment

    try:
        proc = subprocess.run([sys.executable, "-c", _DISCOVER, kind], capture_output=True, text=True, timeout=180,
                              env=scrubbed_environment(env), check=False)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("KFORGE_DEVICES ")), None)
        if line is not None:
            return [(str(n), str(c)) for n, c in json.loads(line.split(" ", 1)[1])]
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    if kind == "cuda" and shutil.which("nvidia-smi"):
        # torch could not tell (no CUDA build here?): the driver can still count the GPUs.
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [(ln.split(":", 1)[1].split("(UUID")[0].strip(), "") for ln in out.splitlines() if ln.startswith("GPU ")]
    return []

