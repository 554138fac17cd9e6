"""The CPU target: the host's monotonic clock as its timer, a no-op synchronize, a flush buffer larger than
the last-level cache, and a description of what could change a timing."""

from __future__ import annotations

import os
import time

import torch

from kforge_bot.targets import cpu_model
from kforge_bot.targets.base import CPU_FLUSH_BYTES, HostTimer
from kforge_bot.targets.cpu import CpuTarget


def test_the_timer_measures_host_time_in_milliseconds() -> None:
    timer = CpuTarget().timer()
    assert isinstance(timer, HostTimer)
    timer.start()
    time.sleep(0.02)
    timer.stop()
    elapsed = timer.elapsed_ms()
    assert 15.0 <= elapsed < 1000.0


def test_a_timer_keeps_the_clock_it_was_made_with(monkeypatch) -> None:
    timer = HostTimer()
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)  # a patch after the fact changes nothing
    timer.start()
    time.sleep(0.005)
    timer.stop()
    assert timer.elapsed_ms() > 0


def test_synchronize_returns_and_the_device_is_the_host() -> None:
    target = CpuTarget()
    assert CpuTarget.available()
    assert target.synchronize() is None
    assert target.device == torch.device("cpu")
    assert target.memory_stats() == {}


def test_flush_cache_overwrites_one_buffer_larger_than_the_cache() -> None:
    target = CpuTarget()
    target.flush_cache()
    buffer = target._flush_buffer
    assert buffer is not None and buffer.numel() * buffer.element_size() == CPU_FLUSH_BYTES
    assert buffer.device.type == "cpu" and bool((buffer == 1).all())
    buffer.fill_(0)
    target.flush_cache()
    assert target._flush_buffer is buffer and bool((buffer == 1).all())  # the same buffer, written again


def test_describe_names_what_could_change_a_timing() -> None:
    info = CpuTarget().describe()
    assert info["kind"] == "cpu" and info["device_name"] == cpu_model() and info["torch"] == torch.__version__
    assert info["cores"] == os.cpu_count() and info["torch_threads"] == torch.get_num_threads()
    assert info["machine"]
