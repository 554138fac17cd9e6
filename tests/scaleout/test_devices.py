"""Which devices the pool's slots go on: every visible GPU of the first one's model, or CPU slots as asked."""

from __future__ import annotations

import os

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.scaleout import devices as devices_mod
from kforge_bot.scaleout.devices import Device, discover_devices


def test_device_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [d.visible for d in discover_devices("cpu")] == [""]
    assert len(discover_devices("cpu", 3)) == 3
    rows = [("NVIDIA H200", "9.0"), ("NVIDIA H200", "9.0"), ("NVIDIA A10", "8.6")]
    monkeypatch.setattr(devices_mod, "_query_devices", lambda kind, env: rows)
    found = discover_devices("cuda", environ={"CUDA_VISIBLE_DEVICES": "2,5,7"})
    assert [(d.visible, d.name, d.capability) for d in found] == [("2", "NVIDIA H200", "9.0"),
                                                                   ("5", "NVIDIA H200", "9.0")]
    assert [d.visible for d in discover_devices("cuda", 1, environ={})] == ["0"]
    with pytest.raises(KforgeError, match="must never share"):
        discover_devices("cuda", 3, environ={})
    monkeypatch.setattr(devices_mod, "_query_devices", lambda kind, env: [])
    with pytest.raises(KforgeError, match="no cuda device"):
        discover_devices("cuda", environ={})


def test_no_gpu_here_is_a_clear_error() -> None:
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has a GPU")
    with pytest.raises(KforgeError, match="no cuda device is visible"):
        discover_devices("cuda")


def test_a_device_describes_where_it_is_pinned() -> None:
    assert Device("cuda", "3", "NVIDIA H200", "9.0").describe() == "NVIDIA H200 (CUDA_VISIBLE_DEVICES=3)"
    assert Device("xpu", "1").describe() == "xpu (ZE_AFFINITY_MASK=1)"
    assert Device("cpu", "", "cpu slot 0").describe() == "cpu slot 0 (host CPU)"
