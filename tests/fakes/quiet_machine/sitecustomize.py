"""Run at the start of the kforge-bot processes the suite starts (tests/fakes/gate_repos.py's `cli` puts this folder
on PYTHONPATH): the timing-disturbance detector's limits off, as tests/conftest.py turns them off in the suite's
own process. The suite runs on shared, loaded machines; the detector has tests of its own (marked `disturbance`).

An import hook, not an import: importing kforge_bot here would slow every Python process the suite starts."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any

_MODULE = "kforge_bot.evaluate.wire.conditions"


class _LimitsOff(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)  # once, and never in the way of anything else
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            for limit in ("PREEMPTED_SHARE", "PREEMPTED_GAP", "CROWDED_SHARE"):
                setattr(module, limit, 1.0)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _LimitsOff())
