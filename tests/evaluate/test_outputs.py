"""How outputs reach the bot (evaluate.wire.outputs): the rules every handed-over output must meet, and the file path.

Mapping device memory needs a GPU (tests/test_gpu.py); what the bot accepts on the channel does not: a candidate
writes these messages, so each must carry the nonce, exactly one fd, and name an output once."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from kforge_bot.evaluate.wire import devshare, outputs


def _wait_for(predicate, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


@pytest.fixture
def channel():
    mine, theirs = outputs.channel()
    shared = outputs.SharedOutputs(mine, "cuda")
    shared.expect("n0nce")
    yield shared, theirs
    theirs.close()
    shared.close()


def _send(sock: socket.socket, payload: dict, fds: int = 1) -> list[int]:
    pipes = [os.pipe() for _ in range(fds)]
    devshare.send_fds(sock, json.dumps(payload).encode(), [r for r, _ in pipes])
    for r, w in pipes:
        os.close(r)
        os.close(w)
    return [r for r, _ in pipes]


def _message(name: str = "cand_0_0.out", nonce: str = "n0nce") -> dict:
    return {"nonce": nonce, "name": name, "size": 1 << 21, "tensors": [{"dtype": "float32", "shape": [4], "offset": 0}]}


def test_an_output_with_the_nonce_and_one_fd_is_kept_by_name(channel) -> None:
    shared, theirs = channel
    _send(theirs, _message())
    _wait_for(lambda: "cand_0_0.out" in shared.names())
    assert not shared.rejected


@pytest.mark.parametrize("payload, fds, why", [
    (_message(nonce="forged"), 1, "without the request's nonce"),
    (_message(), 2, "malformed"),
    (_message(), 0, "malformed"),
    ({"nonce": "n0nce", "name": 7, "size": 1, "tensors": []}, 1, "malformed"),
])
def test_a_message_that_breaks_the_rules_is_refused_and_its_fds_closed(channel, payload, fds, why) -> None:
    shared, theirs = channel
    before = len(os.listdir("/proc/self/fd"))
    _send(theirs, payload, fds)
    _wait_for(lambda: bool(shared.rejected))
    assert why in shared.rejected and not shared.names()
    _wait_for(lambda: len(os.listdir("/proc/self/fd")) <= before)  # nothing received is left open


def test_an_output_handed_over_twice_is_refused(channel) -> None:
    shared, theirs = channel
    _send(theirs, _message())
    _send(theirs, _message())
    _wait_for(lambda: bool(shared.rejected))
    assert "twice" in shared.rejected and shared.names() == {"cand_0_0.out"}


def test_a_message_that_is_not_json_is_refused(channel) -> None:
    shared, theirs = channel
    r, w = os.pipe()
    devshare.send_fds(theirs, b"\xff not json", [r])
    os.close(r)
    os.close(w)
    _wait_for(lambda: bool(shared.rejected))
    assert "not JSON" in shared.rejected


def test_an_fd_that_is_no_device_allocation_does_not_import(channel) -> None:
    """What a candidate hands over is mapped only if the driver accepts it as an allocation of the claimed
    size; a pipe (or, here, a machine without a CUDA driver) is an error for the bot to report, not a crash."""
    shared, theirs = channel
    _send(theirs, _message())
    _wait_for(lambda: "cand_0_0.out" in shared.names())
    with pytest.raises(devshare.DeviceShareError):
        shared.take("cand_0_0.out")
    assert shared.take("cand_0_0.out") is None  # taken once


def test_outputs_not_handed_over_are_read_from_their_files(tmp_path: Path) -> None:
    tensors = [torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.tensor([True, False])]
    outputs.FileSink().save(tensors, tmp_path / "ref_0_0.out")
    mine, theirs = outputs.channel()
    shared = outputs.SharedOutputs(mine, "cuda")
    try:
        loaded = outputs.load(tmp_path, "ref_0_0.out", shared)
    finally:
        theirs.close()
        shared.close()
    assert all(torch.equal(a, b) for a, b in zip(loaded, tensors))


def test_a_file_sink_writes_with_the_module_it_was_made_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker makes its sink before any user code exists; by its first save the harness is hidden from
    sys.modules, and whatever the candidate put there under the tensor-file module's name must not be used."""
    import kforge_bot.evaluate

    sink = outputs.FileSink()
    planted = types.ModuleType("kforge_bot.evaluate.wire.tensorfile")
    planted.write = lambda tensors, path: pytest.fail("the planted writer was used")
    monkeypatch.setitem(sys.modules, "kforge_bot.evaluate.wire.tensorfile", planted)
    monkeypatch.setattr(kforge_bot.evaluate, "tensorfile", planted, raising=False)
    tensors = [torch.arange(4, dtype=torch.float32)]
    sink.save(tensors, tmp_path / "cand_0_0.out")
    monkeypatch.undo()
    assert torch.equal(outputs.load(tmp_path, "cand_0_0.out", None)[0], tensors[0])


def test_a_cpu_target_saves_files() -> None:
    assert isinstance(outputs.make_sink(None, "n", "cuda"), outputs.FileSink)
    mine, theirs = outputs.channel()
    try:
        assert isinstance(outputs.make_sink(theirs.fileno(), "n", "cpu"), outputs.FileSink)
    finally:
        mine.close()
        theirs.close()


def test_closing_stops_the_collector_and_closes_what_was_not_taken(channel) -> None:
    shared, theirs = channel
    _send(theirs, _message())
    _wait_for(lambda: "cand_0_0.out" in shared.names())
    shared.close()
    assert not shared.names()


def test_a_worker_that_hands_over_more_outputs_than_allowed_is_refused(channel, monkeypatch) -> None:
    """Each output held is an open fd in the bot: a flood must not exhaust its descriptors."""
    shared, theirs = channel
    monkeypatch.setattr(outputs, "MAX_SHARED", 2)
    for i in range(3):
        _send(theirs, _message(name=f"cand_{i}.out"))
    _wait_for(lambda: bool(shared.rejected))
    assert "over 2 outputs" in shared.rejected and len(shared.names()) == 2
