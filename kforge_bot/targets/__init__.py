"""Device targets behind one protocol, and the one way a target is chosen (choose_target): by name, runner class or
`auto`."""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import TARGET_KINDS

AUTO_ORDER = ("cuda", "xpu", "mps", "cpu")  # what `auto` picks: the first of these this machine has


def target_kind(target: str) -> str:
    """The device kind of an evaluation's target, which may name a device: "cuda:1" -> "cuda", "cpu" -> "cpu"."""
    return target.partition(":")[0]


def target_index(target: str) -> int:
    """The device index a target names: "cuda:1" -> 1; 0 where it names none."""
    _, _, index = target.partition(":")
    return int(index) if index.isdigit() else 0


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


@dataclass(frozen=True)
class TargetChoice:
    """A target as the user (`--target`) or the policy (`required_targets`) names it: auto, a device kind, or a
    hardware runner class (h200, b200, arc-b580, ...), which means that class's device kind."""

    requested: str  # as written
    kind: str | None  # the device kind; None for auto: the first of AUTO_ORDER here, among a kernel's targets
    runner: str | None = None  # the runner class, when one was named

    def device_kind(self, kernel_targets: Sequence[str] | None = None) -> str:
        """The device kind to run on: the named one, or for auto the first this machine has among `kernel_targets`
        (all kinds when None); a KforgeError when there is none."""
        kind = self.kind or _first_here(kernel_targets)
        if kind is None:
            raise KforgeError("no device this kernel supports is available here",
                              hint=f"kernel targets: {', '.join(kernel_targets or ())}")
        return kind

    def kernel_kind(self, kernel_targets: Sequence[str]) -> tuple[str | None, str]:
        """(the device kind to measure a kernel on, "") or (None, why the kernel is skipped): a named kind the kernel
        does not run on, or none of its kinds on this machine."""
        if self.kind is not None:
            if self.kind not in kernel_targets:
                return None, f"the kernel does not run on {self.kind} (its targets: {', '.join(kernel_targets)})"
            return self.kind, ""
        kind = _first_here(kernel_targets)
        return (kind, "") if kind else (None, f"none of the kernel's targets ({', '.join(kernel_targets)}) is on this "
                                              "machine")

    @property
    def needs(self) -> str:
        """What measuring it takes, for a report: the kind, or the runner class and its title."""
        if self.runner is None:
            return self.kind or self.requested
        from kforge_bot.hardware import get_runner

        return f"{self.runner}: {get_runner(self.runner).title.split(' (')[0]}"


def _first_here(kinds: Sequence[str] | None) -> str | None:
    """What auto picks: the first kind of AUTO_ORDER (among `kinds`, all when None) this machine has."""
    return next((kind for kind in AUTO_ORDER if (kinds is None or kind in kinds) and available(kind)), None)


def choose_target(requested: str | TargetChoice = "auto", *, here: bool = True) -> TargetChoice:
    """The one reading of a target, for every command, the gate, the PR bot and evaluate: auto, a device kind or a
    runner class. `here`: a named kind must be on this machine (a KforgeError saying so); without it, only the
    name is checked (what `--target` accepts as the options are read)."""
    if isinstance(requested, TargetChoice):
        return requested
    value = (requested or "auto").strip()
    if value == "auto":
        return TargetChoice("auto", None)
    if value in TARGET_KINDS:
        choice = TargetChoice(value, value)
    else:
        from kforge_bot.hardware import all_runners  # reads the runner files: only for a name that is no kind

        runners = all_runners()
        if value not in runners:
            raise KforgeError(f"unknown target {value!r}",
                              hint=f"use auto, a device kind ({', '.join(TARGET_KINDS)}) or a runner class "
                                   f"({', '.join(sorted(runners))})")
        choice = TargetChoice(value, runners[value].target, value)
    if here and choice.kind is not None and not (_device_nodes_present(choice.kind) or available(choice.kind)):
        if choice.runner is not None:
            raise KforgeError(f"target {value!r} needs a {choice.kind} device, and this machine has none",
                              hint="run on a runner of that class, or use --target auto")
        raise KforgeError(f"target {value!r} is not available on this machine",
                          hint="run `kforge-bot doctor` to see what is, or use --target auto")
    return choice


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
