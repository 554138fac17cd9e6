"""The CPU target: synchronous, timed with the host's monotonic clock."""

from __future__ import annotations

import os
import platform
from typing import Any

import torch

from kforge_bot.targets import cpu_model
from kforge_bot.targets.base import HostTimer, Target, Timer


class CpuTarget(Target):
    kind = "cpu"

    @classmethod
    def available(cls) -> bool:
        return True

    def device_name(self) -> str:
        return cpu_model()

    def timer(self) -> Timer:
        return HostTimer()

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info.update(cores=os.cpu_count(), torch_threads=torch.get_num_threads(), machine=platform.machine())
        return info
