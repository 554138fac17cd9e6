"""The worker's own helpers: the memory it tells the plan about (whole worker runs: test_api.py, test_sandbox.py)."""

from __future__ import annotations

import pytest
import torch

from kforge_bot.evaluate.worker import entry as worker


@pytest.mark.parametrize("text, expected", [("", None), ("4G", 4 << 30), ("512M", 512 << 20), ("1.5k", 1536),
                                            ("2GB", 2 << 30), ("123", 123), ("lots", None)])
def test_the_memory_budget_is_read_in_bytes_with_suffixes(text: str, expected: int | None) -> None:
    assert worker._parse_bytes(text) == expected


def test_free_memory_on_the_cpu_is_the_hosts_and_the_budget_caps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    device_free, host_free = worker.free_memory(torch.device("cpu"))
    assert device_free is None and host_free > 0  # the CPU's memory is the host's
    monkeypatch.setenv("KFORGE_MEMORY_BUDGET", "1M")
    assert worker.free_memory(torch.device("cpu")) == (None, 1 << 20)
