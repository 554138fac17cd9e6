"""Which device kind each kernel is measured on (`--target`: auto, a kind or a runner class), and the policy's
required targets: where each applies and whether this run measured it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kforge_bot.config.policy import Policy
from kforge_bot.errors import KforgeError
from kforge_bot.hardware import all_runners, get_runner
from kforge_bot.spec import TARGET_KINDS, KernelSpec
from kforge_bot.targets import AUTO_ORDER, available  # without torch for cpu: a fully cached gate never needs it


@dataclass(frozen=True)
class TargetChoice:
    """What `--target` asked for: auto, a device kind, or a hardware runner class (h200, b200, ...)."""

    requested: str
    kind: str | None  # None for auto
    runner: str | None = None


def parse_target(value: str) -> TargetChoice:
    value = (value or "auto").strip()
    if value == "auto":
        return TargetChoice("auto", None)
    if value in TARGET_KINDS:
        if not available(value):
            raise KforgeError(f"target {value!r} is not available on this machine",
                              hint="run `kforge-bot doctor` to see what is, or use --target auto")
        return TargetChoice(value, value)
    runners = all_runners()
    if value not in runners:
        raise KforgeError(f"unknown target {value!r}",
                          hint=f"use auto, a device kind ({', '.join(TARGET_KINDS)}) or a runner class "
                               f"({', '.join(sorted(runners))})")
    kind = runners[value].target
    if not available(kind):
        raise KforgeError(f"target {value!r} needs a {kind} device, and this machine has none",
                          hint="run the gate on a runner of that class, or use --target auto")
    return TargetChoice(value, kind, value)


def kernel_target(choice: TargetChoice, spec: KernelSpec) -> tuple[str | None, str]:
    """(device kind to measure on, or None with the reason it is skipped)."""
    if choice.kind is not None:
        if choice.kind not in spec.targets:
            return None, f"the kernel does not run on {choice.kind} (its targets: {', '.join(spec.targets)})"
        return choice.kind, ""
    for kind in AUTO_ORDER:
        if kind in spec.targets and available(kind):
            return kind, ""
    return None, f"none of the kernel's targets ({', '.join(spec.targets)}) is on this machine"


# ---------------------------------------------------------------------------------- required targets


@dataclass(frozen=True)
class RequiredTarget:
    """One entry of the policy's `required_targets`: a device kind, or a runner class (h200, ...)."""

    name: str
    kind: str
    runner: str | None = None
    title: str = ""

    @property
    def needs(self) -> str:
        return self.kind if self.runner is None else f"{self.name}: {self.title.split(' (')[0]}"


def required_targets(policy: Policy) -> list[RequiredTarget]:
    """The policy's required targets, resolved; an unknown name is a configuration error."""
    out: list[RequiredTarget] = []
    runners = None
    for name in policy.required_targets:
        if name in TARGET_KINDS:
            out.append(RequiredTarget(name, name))
            continue
        if runners is None:
            runners = all_runners()
        if name not in runners:
            raise KforgeError(f"required_targets: unknown target {name!r}", path=policy.source,
                              hint=f"use a device kind ({', '.join(TARGET_KINDS)}) or a runner class "
                                   f"({', '.join(sorted(runners))})")
        runner = runners[name]
        out.append(RequiredTarget(name, runner.target, name, runner.title))
    return out


def required_status(required: Sequence[RequiredTarget], spec: KernelSpec, measured_kind: str | None,
                    device_name: str, choice: TargetChoice) -> dict[str, str]:
    """Per required target that applies to the kernel (it runs there): "measured" when this run
    measured it on that target, else "skipped (needs ...)". Pure apart from runner-class matching."""
    out: dict[str, str] = {}
    for r in required:
        if r.kind not in spec.targets:
            continue  # the kernel does not run there: nothing to require
        measured = measured_kind == r.kind
        if measured and r.runner is not None and choice.runner != r.runner:
            measured = get_runner(r.runner).matches(device_name)
        out[r.name] = "measured" if measured else f"skipped (needs {r.needs})"
    return out

