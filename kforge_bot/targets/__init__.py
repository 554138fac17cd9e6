"""Device targets behind one protocol, chosen by name or `auto`."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

from kforge_bot.errors import KforgeError
from kforge_bot.spec import TARGET_KINDS

AUTO_ORDER = ("cuda", "xpu", "mps", "cpu")  # what `auto` picks: the first of these this machine has


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
    raise KforgeError(f"unknown target {name!r}", hint=f"use one of {', '.join(TARGET_KINDS)} or auto")


def resolve_target_name(name: str, allowed: tuple[str, ...] | None = None) -> str:
    """'auto' -> the first available device kind (among `allowed`); a named kind must be available."""
    if name == "auto":
        for kind in AUTO_ORDER:
            if (allowed is None or kind in allowed) and available(kind):
                return kind
        raise KforgeError("no device this kernel supports is available here",
                          hint=f"kernel targets: {', '.join(allowed or ())}")
    if not (_device_nodes_present(name) or available(name)):
        raise KforgeError(f"target {name!r} is not available on this machine",
                          hint="run `kforge-bot doctor` to see what is, or use --target auto")
    return name


def available(kind: str) -> bool:
    """Whether this machine has a device of `kind` that torch can use."""
    # The host CPU always is, and saying so must not import torch (seconds) into the bot's own process.
    return kind == "cpu" or target_class(kind).available()


def _device_nodes_present(kind: str) -> bool:
    """A CUDA target named outright, on a machine with NVIDIA's device nodes, is taken at its word without
    importing torch here (2-4 s on a GPU host, on the critical path of every `check`); the workers' own check
    says plainly if torch cannot use the device ("target 'cuda' is not available on this machine: torch here
    has no CUDA support (a CPU build)")."""
    return kind == "cuda" and "torch" not in sys.modules and \
        any(Path(node).exists() for node in ("/dev/nvidiactl", "/dev/dxg"))


def unavailable_reason(kind: str) -> str | None:
    """In a worker: why `kind` cannot be used by this process's torch, or None when it can."""
    if available(kind):
        return None
    import torch  # here, not at the top: `import kforge_bot.targets` stays cheap in the bot's process

    if kind == "cuda":
        return ("torch here has no CUDA support (a CPU build)" if torch.version.cuda is None
                else "torch found no usable CUDA device (driver, permissions or CUDA_VISIBLE_DEVICES)")
    return f"torch here cannot use {kind}"


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
