"""The policy's required targets (read as `--target` is: kforge_bot.targets.choose_target): where each applies
and whether this run measured it."""

from __future__ import annotations

from collections.abc import Sequence

from kforge_bot.config.policy import Policy
from kforge_bot.errors import KforgeError
from kforge_bot.hardware import all_runners, get_runner
from kforge_bot.kernelspec import TARGET_KINDS, KernelSpec
from kforge_bot.targets import TargetChoice, choose_target


def required_targets(policy: Policy) -> list[TargetChoice]:
    """The policy's required targets, read as `--target` is (choose_target); an unknown name, or auto, is a
    configuration error naming the policy file."""
    out: list[TargetChoice] = []
    for name in policy.required_targets:
        try:
            target = choose_target(name, here=False)
        except KforgeError:
            target = TargetChoice(name, None)
        if target.kind is None:
            raise KforgeError(f"required_targets: unknown target {name!r}", path=policy.source,
                              hint=f"use a device kind ({', '.join(TARGET_KINDS)}) or a runner class "
                                   f"({', '.join(sorted(all_runners()))})")
        out.append(target)
    return out


def required_status(required: Sequence[TargetChoice], spec: KernelSpec, kind: str | None,
                    device_name: str, target: TargetChoice) -> dict[str, str]:
    """Per required target that applies to the kernel (it runs there): "measured" when this run (on `target`)
    measured it on device `kind`, else "skipped (needs ...)". Pure apart from runner-class matching."""
    out: dict[str, str] = {}
    for r in required:
        if r.kind not in spec.targets:
            continue  # the kernel does not run there: nothing to require
        measured = kind == r.kind
        if measured and r.runner is not None and target.runner != r.runner:
            measured = get_runner(r.runner).matches(device_name)
        out[r.requested] = "measured" if measured else f"skipped (needs {r.needs})"
    return out

