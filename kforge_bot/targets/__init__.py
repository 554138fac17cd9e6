"""Device targets behind one protocol, chosen by name or `auto`."""

from __future__ import annotations

import platform
from pathlib import Path

from kforge_bot.errors import KforgeError

TARGET_NAMES = ("cpu", "cuda", "xpu", "mps")
AUTO_ORDER = ("cuda", "xpu", "mps", "cpu")


def target_class(name: str):  # -> type[Target]; imported lazily so `import kforge_bot.targets` stays cheap
    if name == "cpu":
        from kforge_bot.targets.cpu import CpuTarget
        return CpuTarget
    if name == "cuda":
        from kforge_bot.targets.cuda import CudaTarget
        return CudaTarget
    if name == "xpu":
        from kforge_bot.targets.xpu import XpuTarget
        return XpuTarget
    if name == "mps":
        from kforge_bot.targets.mps import MpsTarget
        return MpsTarget
    raise KforgeError(f"unknown target {name!r}", hint=f"use one of {', '.join(TARGET_NAMES)} or auto")


def resolve_target_name(name: str, allowed: tuple[str, ...] | None = None) -> str:
    """'auto' -> the first available device kind (among `allowed`); a named kind must be available."""
    if name == "auto":
        for kind in AUTO_ORDER:
            if (allowed is None or kind in allowed) and _available(kind):
                return kind
        raise KforgeError("no device this kernel supports is available here",
                          hint=f"kernel targets: {', '.join(allowed or ())}")
    if not _available(name):
        raise KforgeError(f"target {name!r} is not available on this machine",
                          hint="run `kforge-bot doctor` to see what is, or use --target auto")
    return name


def _available(kind: str) -> bool:
    # The host CPU always is, and saying so must not import torch (seconds) into the bot's own process.
    return kind == "cpu" or target_class(kind).available()


def make_target(name: str, index: int = 0):
    return target_class(name)(index)


def cpu_model() -> str:
    """The CPU's marketing name: one answer for the target, doctor's ceilings and the result cache's keys."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"
