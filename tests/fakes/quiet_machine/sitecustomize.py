"""Run at the start of the kforge-bot processes the suite starts (tests/fakes/gate_repos.py's `cli` puts this folder
on PYTHONPATH): the timing-disturbance detector's limits off, as tests/conftest.py turns them off in the suite's
own process. The suite runs on shared, loaded machines; the detector has tests of its own (marked `disturbance`).
PyGithub's spacing of requests is off too: the GitHub these processes talk to is the suite's fake.

With KFORGE_TEST_FAKE_WORKERS=1 in its environment (a test's choice, never the package's), the process starts the
scripted workers of tests/fakes/workers.py instead of real ones: a command's own logic, tested without torch workers.
With KFORGE_TEST_WORKER_LOG set (tests/conftest.py says why), it starts none: it names the test and refuses.

An import hook, not an import: importing kforge_bot here would slow every Python process the suite starts."""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable

_MODULE = "kforge_bot.evaluate.wire.conditions"
_SEAM = "kforge_bot.evaluate.sandbox"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `then` on module `name` once it has been executed."""

    def __init__(self, name: str, then: Callable[[Any], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # once, and never in the way of anything else
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run, then = spec.loader.exec_module, self.then

        def exec_module(module: Any) -> None:
            run(module)
            then(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _limits_off(module: Any) -> None:
    for limit in ("PREEMPTED_SHARE", "PREEMPTED_GAP", "CROWDED_SHARE", "WAIT_SHARE"):
        setattr(module, limit, 1.0)


def _no_throttle(module: Any) -> None:
    # PyGithub spaces requests 0.25 s and writes 1 s apart by default, a courtesy to github.com; these processes
    # talk to the suite's loopback fake (tests/fakes/github_server.py), where that was seconds of sleep per test.
    module.DEFAULT_SECONDS_BETWEEN_REQUESTS = None
    module.DEFAULT_SECONDS_BETWEEN_WRITES = None


def _fake_workers(module: Any) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for `fakes`
    from fakes.workers import FakeWorkers

    module.starter = FakeWorkers().start


def _no_workers(module: Any) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for `fakes`
    from fakes.workers import refuse_real_workers

    refuse_real_workers(module)


sys.meta_path.insert(0, _AfterImport(_MODULE, _limits_off))
sys.meta_path.insert(0, _AfterImport("github.Consts", _no_throttle))
if os.environ.get("KFORGE_TEST_FAKE_WORKERS") == "1":
    sys.meta_path.insert(0, _AfterImport(_SEAM, _fake_workers))
elif os.environ.get("KFORGE_TEST_WORKER_LOG"):
    sys.meta_path.insert(0, _AfterImport(_SEAM, _no_workers))
