"""A slot: the environment its evaluation children inherit (its device pinned, its mark) and how a dead slot
process is described. Whole slots at work (crashes, hangs, a killed slot replaced) are in test_pool.py."""

from __future__ import annotations

import signal
from pathlib import Path
from types import SimpleNamespace

from kforge_bot.scaleout.devices import Device
from kforge_bot.scaleout.orphans import SLOT_MARK
from kforge_bot.scaleout.slots import Slot, _exit_words


def _slot(tmp_path: Path, device: Device) -> Slot:
    pool = SimpleNamespace(token="t0k", scratch=tmp_path, build_env={"KFORGE_EXTENSIONS_ROOT": str(tmp_path / "ext")})
    return Slot(pool, 2, device)  # type: ignore[arg-type]  # the few attributes a slot reads of its pool


def test_a_slots_environment_pins_its_device_and_carries_its_mark(tmp_path: Path) -> None:
    slot = _slot(tmp_path, Device("cuda", "7", "NVIDIA H200"))
    slot.mark, slot.scratch = "t0k-2-1", tmp_path / "slot2"
    assert slot._env() == {SLOT_MARK: "t0k-2-1", "KFORGE_SLOT_SCRATCH": str(tmp_path / "slot2"),
                           "CUDA_VISIBLE_DEVICES": "7", "KFORGE_EXTENSIONS_ROOT": str(tmp_path / "ext")}
    on_xpu = _slot(tmp_path, Device("xpu", "1"))
    assert on_xpu._env()["ZE_AFFINITY_MASK"] == "1"
    on_cpu = _slot(tmp_path, Device("cpu", "", "cpu slot 0"))
    assert "CUDA_VISIBLE_DEVICES" not in on_cpu._env() and "ZE_AFFINITY_MASK" not in on_cpu._env()


def test_a_dead_slot_process_is_described_by_its_exit() -> None:
    assert _exit_words(-signal.SIGKILL) == "killed by SIGKILL"
    assert _exit_words(-signal.SIGSEGV) == "killed by SIGSEGV"
    assert _exit_words(3) == "exit status 3"
    assert _exit_words(None) == "no exit status"
    assert _exit_words(-200) == "signal 200"
