"""Output files between a worker and the bot: every dtype round-trips, and a forged file is refused."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch
from fakes.fifo import outcome_without_a_writer

from kforge_bot.evaluate.wire import tensorfile

ATTACK = Path(__file__).parents[1] / "data" / "adversarial" / "evasive_reference_files.py"


def test_every_dtype_and_shape_round_trips_and_survives_the_file_being_deleted(tmp_path: Path) -> None:
    torch.manual_seed(0)
    tensors = [torch.randn(3, 5), torch.randn(7).half(), torch.randn(2, 2).bfloat16(), torch.arange(6).int(),
               torch.tensor(True), torch.empty(0, 4), torch.randn(4, 6).t(), torch.randn(3, dtype=torch.complex64),
               torch.randn(5).to(torch.float8_e4m3fn), torch.randint(0, 255, (9,), dtype=torch.uint8)]
    path = tmp_path / "out.out"
    tensorfile.write(tensors, path)
    back = tensorfile.read(path)
    path.unlink()  # mapped: still readable
    assert len(back) == len(tensors)
    for a, b in zip(tensors, back):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a.view(torch.uint8) if a.dtype == torch.float8_e4m3fn else a,
                           b.view(torch.uint8) if b.dtype == torch.float8_e4m3fn else b)
    back[0].fill_(1.0)  # private: writing a tensor read back changes nothing on disk or elsewhere


@pytest.mark.parametrize("damage", ["empty", "torch.save", "truncated", "header out of bounds", "bad dtype",
                                    "data past the end", "negative shape", "symlink", "overlapping tensors"])
def test_a_forged_or_damaged_file_is_refused_not_trusted(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "out.out"
    tensorfile.write([torch.randn(64)], path)
    raw = path.read_bytes()
    header_len = int.from_bytes(raw[4:12], "little")
    header = raw[12:12 + header_len]
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "torch.save":
        torch.save([torch.randn(64)], path)
    elif damage == "truncated":
        path.write_bytes(raw[:100])
    elif damage == "header out of bounds":
        path.write_bytes(raw[:4] + (1 << 40).to_bytes(8, "little") + raw[12:])
    elif damage in ("bad dtype", "data past the end", "negative shape", "overlapping tensors"):
        entry = header[1:-1]  # the one tensor's entry, twice: the same 256 bytes listed again
        new = {"bad dtype": header.replace(b'"float32"', b'"object" '),
               "data past the end": header.replace(b"[64]", b"[99]"),
               "negative shape": header.replace(b"[64]", b"[-1]"),
               "overlapping tensors": b"[" + entry + b", " + entry + b"]"}[damage]
        pad = b"\0" * 64  # the longer header moves the data one alignment step on: the bytes are still all there
        path.write_bytes(raw[:4] + len(new).to_bytes(8, "little") + new + raw[12 + header_len:] + pad)
    else:
        target = tmp_path / "elsewhere.out"
        path.rename(target)
        os.symlink(target, path)
    with pytest.raises(tensorfile.UnreadableTensorFile):
        tensorfile.read(path)


def test_the_evasive_attack_reads_this_format(tmp_path: Path) -> None:
    # The attack (tests/data/adversarial/evasive_reference_files.py) must be able to read reference outputs it
    # finds, or its "incorrect" verdict would prove nothing about the files being out of its reach.
    spec = importlib.util.spec_from_file_location("attack", ATTACK)
    attack = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(attack)
    tensors = [torch.randn(4, 8)]
    tensorfile.write(tensors, tmp_path / "ref_0_0.out")
    assert torch.equal(attack._read(tmp_path / "ref_0_0.out")[0], tensors[0])


def test_a_file_changed_after_it_was_written_is_refused_against_its_digest(tmp_path: Path) -> None:
    # A candidate's worker writes its outputs in a folder the candidate's code can write: the digest `write`
    # returns (reported over the worker's nonce channel) is what the bot reads the file against.
    torch.manual_seed(0)
    tensors = [torch.randn(3, 5), torch.empty(0, 2), torch.tensor(True), torch.randn(7).half()]
    path = tmp_path / "cand_t0_0.out"
    digest = tensorfile.write(tensors, path)
    assert all(torch.equal(a, b) for a, b in zip(tensors, tensorfile.read(path, digest)))
    raw = bytearray(path.read_bytes())
    header_len = int.from_bytes(raw[4:12], "little")
    start = (12 + header_len + 63) // 64 * 64
    raw[start] ^= 1  # one bit of the first tensor
    path.write_bytes(bytes(raw))
    tensorfile.read(path)  # well formed: only the digest tells
    with pytest.raises(tensorfile.ChangedTensorFile):
        tensorfile.read(path, digest)
    tensorfile.write([torch.randn(3, 5)], path)  # rewritten whole, in the same format
    with pytest.raises(tensorfile.ChangedTensorFile):
        tensorfile.read(path, digest)


@pytest.mark.parametrize("where", ["first chunk", "middle chunk", "last byte", "chunks swapped"])
def test_a_file_of_many_chunks_checked_on_every_core_refuses_any_changed_chunk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """The digest covers each 64 MB chunk (hashed by the bot on all its cores: one core took seconds on an 8.6 GB
    output); here chunks of 256 bytes, so a small file has many. A changed byte anywhere, or two chunks swapped,
    is refused."""
    monkeypatch.setattr(tensorfile, "CHUNK", 256)
    torch.manual_seed(0)
    tensors = [torch.randn(1000), torch.randn(3, 7).double()]
    path = tmp_path / "cand_t0_0.out"
    digest = tensorfile.write(tensors, path)
    assert all(torch.equal(a, b) for a, b in zip(tensors, tensorfile.read(path, digest)))
    raw = bytearray(path.read_bytes())
    start = (12 + int.from_bytes(raw[4:12], "little") + 63) // 64 * 64
    if where == "chunks swapped":
        raw[start:start + 512] = raw[start + 256:start + 512] + raw[start:start + 256]
    else:
        raw[{"first chunk": start, "middle chunk": start + 5 * 256 + 3, "last byte": len(raw) - 1}[where]] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(tensorfile.ChangedTensorFile):
        tensorfile.read(path, digest)


def test_a_trusted_writer_writes_no_digest_and_its_file_reads_the_same(tmp_path: Path) -> None:
    tensors = [torch.randn(3, 5)]
    assert tensorfile.write(tensors, tmp_path / "ref_0_0.out", digest=False) == ""
    assert torch.equal(tensorfile.read(tmp_path / "ref_0_0.out")[0], tensors[0])


def test_a_fifo_in_place_of_the_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    # Red-team pass: the file lies in the worker's scratch, where its code can put a FIFO with no writer in its
    # place; opening that for reading waited forever, and the bot with it.
    path = tmp_path / "outputs.bin"
    os.mkfifo(path)
    failure = outcome_without_a_writer(path, lambda: tensorfile.read(path))
    assert isinstance(failure, tensorfile.UnreadableTensorFile), failure
