"""Recorded inputs as device memory (evaluate.wire.shipped_device): which values may travel so and come back whole,
and the parent's fallback to a file (evaluate.shipping.Stager). The split and the refill are the same code on any
device, so they are checked here on CPU tensors; the hand-over itself (exported allocations, the head's fresh copy)
is checked on a GPU by tests/test_gpu.py and benchmarks/gate_decision_cost.py, whose rows say how each set went."""

from __future__ import annotations

import functools
import json
import os
from collections import OrderedDict, namedtuple
from pathlib import Path

import pytest
import torch

from kforge_bot.evaluate.shipping import Stager
from kforge_bot.evaluate.wire import shipped_device
from kforge_bot.evaluate.wire.outputs import layout
from kforge_bot.evaluate.wire.shipped import inputs_name, skeleton_name
from kforge_bot.evaluate.worker.shipped_inputs import fetcher
from kforge_bot.evaluate.worker.worker_io import Stop

SPLIT = shipped_device.split
BIG = 1 << 18  # float32 elements: 1 MiB, the smallest value that travels as device memory


def _value() -> list:
    return [torch.randn(BIG), (torch.arange(12, dtype=torch.int64).reshape(3, 4), 3.5),
            {"w": torch.randn(4, 4, requires_grad=True), "n": 7, "size": torch.Size([2, 3])},
            OrderedDict(bias=torch.zeros(8, dtype=torch.float16))]


def test_a_value_split_and_refilled_comes_back_equal_in_structure_values_and_grad_flags() -> None:
    value = _value()
    skeleton, tensors = shipped_device.split(value, "cpu")
    assert len(tensors) == 4 and all(t.device.type == "meta" for t in _tensors_of(skeleton))
    copies = [t.detach().clone() for t in tensors]  # what the head's worker copies out of the mapping
    back = shipped_device.refill(skeleton, copies)
    assert type(back[1]) is tuple and type(back[3]) is OrderedDict and back[2]["size"] == torch.Size([2, 3])
    assert back[2]["n"] == 7 and back[1][1] == 3.5
    for got, want in zip(_tensors_of(back), _tensors_of(value)):
        assert torch.equal(got.detach(), want.detach()) and got.dtype == want.dtype
        assert got.requires_grad == want.requires_grad and (not got.requires_grad or got.is_leaf)


@pytest.mark.parametrize("why, value", [
    ("a tensor on another device", [torch.randn(BIG), torch.randn(BIG, device="meta")]),
    ("a layout that is not contiguous", [torch.randn(1024, BIG // 1024).t()]),
    ("two views of one storage", (lambda x: [x, x[: BIG // 2]])(torch.randn(BIG))),
    ("a tensor subclass", [torch.nn.Parameter(torch.randn(BIG))]),
    ("a container subclass", namedtuple("Pair", "a b")(torch.randn(BIG), 1)),
    ("under a mebibyte", [torch.randn(BIG - 1)]),
    ("no tensor at all", [1, 2.0, "three"]),
])
def test_values_that_would_not_come_back_the_same_stay_files(why: str, value: object) -> None:
    assert shipped_device.split(value, "cpu") is None, why


def test_a_refill_that_does_not_match_the_skeleton_raises() -> None:
    skeleton, tensors = shipped_device.split([torch.randn(BIG), torch.randn(4)], "cpu")
    with pytest.raises(ValueError, match="do not match"):
        shipped_device.refill(skeleton, [tensors[0], torch.randn(5)])
    with pytest.raises(ValueError, match="do not match"):
        shipped_device.refill(skeleton, tensors[:1])
    with pytest.raises(ValueError, match="more tensors"):
        shipped_device.refill(skeleton, tensors + [torch.randn(1)])


def _recording(tmp_path: Path, name: str) -> tuple[Path, list, dict]:
    """A recorded folder as the reference's worker leaves it for a value that went as device memory (its skeleton),
    and the parent's copy of the allocation (here a host buffer laid out as the device's is)."""
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    value = _value()
    skeleton, tensors = shipped_device.split(value, "cpu")
    torch.save(skeleton, recorded / skeleton_name(name))
    header, size = layout(tensors)
    whole = torch.zeros(size, dtype=torch.uint8)
    for entry, t in zip(header, tensors):
        flat = t.detach().reshape(-1).view(torch.uint8)
        whole[entry["offset"]:entry["offset"] + flat.numel()] = flat
    return recorded, value, {name: (whole, header)}


def test_without_a_channel_for_device_memory_the_parent_hands_over_the_whole_value_as_a_file(tmp_path: Path) -> None:
    name = inputs_name(3, {"n": 4})
    recorded, value, on_device = _recording(tmp_path, name)
    stager = Stager(recorded, tmp_path / "scratch", on_device, send=None)
    (tmp_path / "scratch").mkdir()
    reply = stager.answer({"file": name})
    assert reply["ok"] is True and not reply.get("device")
    assert stager.handed == {"device": 0, "file": 1} and name not in stager.on_device  # a file from now on
    back = torch.load(tmp_path / "scratch" / "inbox" / name, weights_only=True)
    for got, want in zip(_tensors_of(back), _tensors_of(value)):
        assert torch.equal(got.detach(), want.detach())
    assert stager.answer({"file": name})["ok"] is True and stager.handed["file"] == 2


def test_a_channel_that_fails_falls_back_to_the_file_and_a_lost_recording_is_said(tmp_path: Path) -> None:
    name = inputs_name(3, {"n": 4})
    recorded, _, on_device = _recording(tmp_path, name)
    (tmp_path / "scratch").mkdir()
    sent: list = []
    stager = Stager(recorded, tmp_path / "scratch", on_device, send=lambda m, fds: sent.append(m))
    reply = stager.answer({"file": name})  # no CUDA driver here: the fresh copy cannot be made
    assert reply["ok"] is True and not reply.get("device") and not sent and (recorded / name).is_file()
    lost = inputs_name(4, {"n": 4})
    (recorded / skeleton_name(lost)).write_bytes(b"")  # its allocation never reached the parent
    assert "lost" in Stager(recorded, tmp_path / "scratch").answer({"file": lost})["refused"]


def test_each_copy_sent_is_held_until_the_head_asks_for_another_and_the_last_until_the_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The allocation a head maps never rests on the fd in flight alone: the parent lets a copy go only once the head
    has asked for the next set (its harness copies each on arrival), and the last one when the evaluation ends."""
    class Copy:
        size = 4096

        def __init__(self) -> None:
            self.closed = False

        def close(self) -> None:
            self.closed = True

    made: list[Copy] = []

    def fresh_copy(whole, device):  # the device's part; what is held and let go is the Stager's
        made.append(Copy())
        return os.open(os.devnull, os.O_RDONLY), made[-1]

    monkeypatch.setattr(shipped_device, "fresh_copy", fresh_copy)
    name = inputs_name(3, {"n": 4})
    recorded, _, on_device = _recording(tmp_path, name)
    (tmp_path / "scratch").mkdir()
    sent: list = []
    stager = Stager(recorded, tmp_path / "scratch", on_device, send=lambda m, fds: sent.append(json.loads(m)))
    assert stager.answer({"file": name})["device"] is True
    assert [c.closed for c in made] == [False]  # the head may still be mapping it
    assert stager.answer({"file": name})["device"] is True
    assert [c.closed for c in made] == [True, False]
    stager.close()
    assert [c.closed for c in made] == [True, True] and [m["size"] for m in sent] == [4096, 4096]


def test_the_heads_harness_refills_the_skeleton_with_what_arrived_and_refuses_without_a_channel(tmp_path: Path) -> None:
    name = inputs_name(3, {"n": 4})
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    value = _value()
    skeleton, tensors = shipped_device.split(value, "cpu")
    torch.save(skeleton, inbox / name)
    arrived = [t.detach().clone() for t in tensors]
    fetch = fetcher(lambda n: {"ok": True, "device": True}, tmp_path, torch.device("cpu"), lambda n: arrived)
    assert torch.equal(fetch(name)[0], value[0])
    with pytest.raises(Stop, match="as device memory: this worker has no channel"):
        fetcher(lambda n: {"ok": True, "device": True}, tmp_path, torch.device("cpu"))(name)


def _tensors_of(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_of(v)]
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        return [t for v in value for t in _tensors_of(v)]
    return []


def test_recordings_the_parent_would_hold_past_its_share_of_the_device_stay_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # On an H100, four 10 GB input sets of KernelBench L1 47 held by the parent left no room for the head's copy of
    # the next. Here a device of 32 MiB: the parent holds at most an eighth, so the first 2 MiB value is handed
    # over, and one that would take the held bytes past 4 MiB stays a file.
    from kforge_bot.evaluate.worker.shipped_inputs import Recorder

    monkeypatch.setattr(shipped_device, "split", functools.partial(SPLIT, device_type="cpu"))
    monkeypatch.setattr(shipped_device, "_device_bytes", lambda device: 32 << 20)
    exported: list[str] = []
    recorder = Recorder(tmp_path / "recorded", export=lambda tensors, name: exported.append(name) or True)
    recorder._save([torch.randn(2 * BIG)], "in-a.pt")
    recorder._save([torch.randn(3 * BIG)], "in-b.pt")
    assert exported == ["in-a.pt"] and recorder.held_bytes == 2 << 20
    assert (tmp_path / "recorded" / "in-b.pt").is_file() and not (tmp_path / "recorded" / "in-a.pt").is_file()

