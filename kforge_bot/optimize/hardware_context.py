"""What the agents are told about the device: its facts and its roofline ceilings, and where those come from."""

from __future__ import annotations

from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.hardware import ceilings_for, facts_for


def hardware_context(target: str, device_name: str) -> tuple[Any, dict[str, Any] | None, str]:
    """(runner facts or None, ceilings as a dict or None, where the ceilings come from).

    Ceilings in order of preference: this machine's own measurement (`kforge-bot doctor --save`), the
    project's measurement of the machine class, the datasheet."""
    facts = None
    try:
        facts = facts_for(target, device_name) if device_name else None
        found = ceilings_for(target, device_name) if device_name else None
    except KforgeError as exc:
        return facts, None, f"ceilings unreadable: {exc}"
    if found is not None and found.origin == "measured":
        return facts, found.to_dict(), found.source
    reference = facts.reference_ceilings() if facts is not None else None
    chosen = reference or found
    if chosen is None:
        return facts, None, (f"no ceilings known for {device_name or target}: run `kforge-bot doctor --save` on this "
                             "machine to measure them")
    return facts, chosen.to_dict(), chosen.source


def hardware_text(target: str, device_name: str, facts: Any, ceilings: dict[str, Any] | None) -> str:
    lines = [facts.prompt_text()] if facts is not None else [f"Device: {device_name or 'unknown'} (target '{target}')."]
    if facts is not None and device_name:
        lines.append(f"- this machine reports: {device_name}")
    if ceilings:
        parts = []
        if ceilings.get("bandwidth_gbs"):
            parts.append(f"memory bandwidth {ceilings['bandwidth_gbs']:g} GB/s")
        parts += [f"{p} {v:g} TFLOP/s" for p, v in sorted((ceilings.get("tflops") or {}).items())]
        if parts:
            lines.append(f"- roofline ceilings ({ceilings.get('origin')}): " + ", ".join(parts))
    return "\n".join(lines)

