"""A pytest plugin for benchmarks/count_worker_starts.sh: after each test, how many sandboxed workers it started and
how long it took (setup, call and teardown), a tab-separated line each in $KFORGE_STARTS_PER_TEST (issue 41).

    PER_TEST=out.tsv bash benchmarks/count_worker_starts.sh python -m pytest -q -p no:cacheprovider
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest


def _workers() -> int:
    try:
        with open(os.environ["KFORGE_STARTS_LOG"]) as log:
            return sum(1 for line in log if line.startswith("worker"))
    except FileNotFoundError:
        return 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    before, started = _workers(), time.monotonic()
    yield
    with open(os.environ["KFORGE_STARTS_PER_TEST"], "a") as out:
        out.write(f"{item.nodeid}\t{_workers() - before}\t{time.monotonic() - started:.2f}\n")
