"""The target protocol's defaults: a sample starts with the cache flushed and the device idle."""

from __future__ import annotations

from kforge_bot.targets.base import HostTimer
from kforge_bot.targets.cpu import CpuTarget


def test_settle_flushes_then_waits_for_the_device() -> None:
    calls: list[str] = []

    class Recording(CpuTarget):
        def flush_cache(self) -> None:
            calls.append("flush")

        def synchronize(self) -> None:
            calls.append("synchronize")

    Recording().settle(lead_ms=5.0)  # the host clock is the device's: no lead to give
    assert calls == ["flush", "synchronize"]


def test_a_host_timer_measures_the_region_between_start_and_stop() -> None:
    timer = HostTimer()
    timer.start()
    sum(range(10000))
    timer.stop()
    assert timer.elapsed_ms() > 0
