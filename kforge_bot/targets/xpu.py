"""The Intel GPU target (Arc, Data Center GPU Max) through `torch.xpu`.

Written against PyTorch's documented XPU API (torch.xpu.Event with enable_timing, torch.xpu.synchronize,
torch.xpu.get_device_name/properties). It has not run on an Intel GPU in this project's CI; the unit tests
exercise it only through its availability check.
"""

from __future__ import annotations

from typing import Any

import torch

from kforge_bot.targets.base import Target, Timer


class XpuEventTimer(Timer):
    def __init__(self) -> None:
        self._start = torch.xpu.Event(enable_timing=True)
        self._end = torch.xpu.Event(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> None:
        self._end.record()

    def elapsed_ms(self) -> float:
        self._end.synchronize()
        return float(self._start.elapsed_time(self._end))


class XpuTarget(Target):
    kind = "xpu"

    @classmethod
    def available(cls) -> bool:
        return hasattr(torch, "xpu") and torch.xpu.is_available()

    def device_name(self) -> str:
        return torch.xpu.get_device_name(self.index)

    def synchronize(self) -> None:
        torch.xpu.synchronize(self.index)

    def timer(self) -> Timer:
        return XpuEventTimer()

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        props = torch.xpu.get_device_properties(self.index)
        info.update(memory_bytes=getattr(props, "total_memory", None),
                    driver=getattr(props, "driver_version", None))
        return info
