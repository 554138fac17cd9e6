"""Which profiler reads a target's hardware counters: unitrace on Intel XPU, else ncu (which says plainly where
it cannot run). Both modules offer the same: NAME, TITLE, PROBE_COMMAND, `unavailable(target)` and
`collect(spec, implementation, target, out_dir, label, *, settings, keep_report, timeout_s, device_name)`,
returning the same digest shape."""

from __future__ import annotations

from types import ModuleType

from kforge_bot.counters import ncu, unitrace
from kforge_bot.targets import target_kind

TOOLS: tuple[ModuleType, ...] = (ncu, unitrace)


def tool_for(target: str) -> ModuleType:
    return unitrace if target_kind(target) == "xpu" else ncu


def title(name: str | None) -> str:
    """A heading's name for the tool that wrote counters (`"tool"` in a collection's result); Nsight Compute for
    results recorded before the key existed."""
    return next((tool.TITLE for tool in TOOLS if tool.NAME == name), ncu.TITLE)
