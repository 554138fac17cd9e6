"""Output tensors as files between a worker and the bot: a JSON header, then each tensor's raw bytes.

torch.save pickles, zips and checksums: measured on the dev VM, 3-6 s for one 512 MB tensor against 0.2 s for
its raw bytes, and an evaluation writes a dozen outputs or more. Here a write is the device-to-host copy and
one `write` per tensor; a read maps the file (no copy until compared). A candidate writes these files, so a
read trusts nothing in them: the header is bounded, every dtype comes from a fixed list, and every tensor's
bytes must lie inside the file.

Layout: 8 bytes (little-endian header length), the header (a JSON list of {"dtype", "shape", "offset"}),
then the data, each tensor starting at a multiple of 64 bytes.

A candidate's worker writes its files in its own scratch folder, which the candidate's code can write too: `write`
returns a digest of what it wrote (the header and every tensor's bytes), the worker reports it over its nonce
channel, and `read(path, digest)` refuses a file whose content is not what was written (`ChangedTensorFile`).
The digest is SHA-256 over the header and the SHA-256 of each 64 MB chunk of each tensor: the worker hashes each
chunk as it leaves the device, and the bot checks the chunks of a file on all its cores (one core hashes about
1.8 GB/s: 4.8 s for one 8.6 GB output; benchmarks/results/tensorfile_digest_cpu.md). A trusted writer (the
reference's worker, whose files no candidate can reach) writes without a digest.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

MAGIC = b"KFT1"
ALIGN = 64
MAX_HEADER = 1 << 20
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


_sha256 = hashlib.sha256  # bound at import, before any candidate code exists in the worker


class UnreadableTensorFile(ValueError):
    """The file is not one this module wrote (truncated, forged, or another format)."""


class ChangedTensorFile(UnreadableTensorFile):
    """The file's header or tensors are not what the worker wrote (its digest differs)."""


CHUNK = 64 << 20  # a device tensor leaves through a pinned buffer of this size, a chunk at a time; a digest's unit
_staging: dict[str, torch.Tensor] = {}


def write(tensors: list[torch.Tensor], path: Path, digest: bool = True) -> str:
    """Write `tensors` (any device) to `path`; returns the digest `read` checks the file against ("" where
    `digest` is False: a trusted writer's file, never checked)."""
    header, offset = [], 0
    flats = []
    for t in tensors:
        name = str(t.dtype).removeprefix("torch.")
        if name not in DTYPES:
            raise TypeError(f"cannot write a {t.dtype} tensor")
        flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
        offset = _aligned(offset)
        header.append({"dtype": name, "shape": list(t.shape), "offset": offset})
        offset += flat.numel()
        flats.append(flat)
    head = json.dumps(header).encode()
    start = _aligned(len(MAGIC) + 8 + len(head))
    chunks: list[bytes] | None = [] if digest else None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        _write_all(fd, MAGIC + len(head).to_bytes(8, "little") + head)
        for entry, flat in zip(header, flats):
            os.lseek(fd, start + entry["offset"], os.SEEK_SET)
            _write_bytes(fd, flat, chunks)
        os.ftruncate(fd, start + offset)
    finally:
        os.close(fd)
    return "" if chunks is None else _combine(head, chunks)


def _write_bytes(fd: int, flat: torch.Tensor, chunks: list[bytes] | None) -> None:
    """A flat uint8 tensor's bytes to `fd`, and each CHUNK's SHA-256 to `chunks` (None: no digest). From a CUDA
    device through one reused pinned buffer of CHUNK bytes: no host copy the size of the output (gigabytes at
    KernelBench's level-1 sizes), and pinned transfers run at full speed."""
    if not flat.numel():
        return
    staging = _pinned_buffer() if flat.device.type == "cuda" else None
    host = memoryview(flat.cpu().numpy()) if staging is None else None
    for begin in range(0, flat.numel(), CHUNK):
        if host is not None:
            view = host[begin:begin + CHUNK]
        else:
            chunk = flat[begin:begin + CHUNK]
            part = staging[:chunk.numel()]
            part.copy_(chunk)  # synchronous: the buffer is complete before it is written out
            view = memoryview(part.numpy())
        if chunks is not None:
            chunks.append(_sha256(view).digest())
        _write_all(fd, view)


def _combine(head: bytes, chunks: list[bytes]) -> str:
    return _sha256(len(head).to_bytes(8, "little") + head + b"".join(chunks)).hexdigest()


def _chunk_digests(tensors: list[torch.Tensor]) -> list[bytes]:
    """The SHA-256 of each CHUNK of each tensor's bytes, in order, hashed on every core (hashlib lets go of the
    GIL for large buffers). The bot's side only: no candidate code shares its process."""
    views = []
    for t in tensors:
        if t.numel():
            flat = memoryview(t.reshape(-1).view(torch.uint8).numpy())
            views += [flat[begin:begin + CHUNK] for begin in range(0, len(flat), CHUNK)]
    if len(views) < 2:
        return [_sha256(v).digest() for v in views]
    with ThreadPoolExecutor(max_workers=min(len(views), os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda v: _sha256(v).digest(), views))


def read(path: Path, digest: str | None = None) -> list[torch.Tensor]:
    """The tensors in `path`, on the CPU, mapped from the file (which may be deleted afterwards). With `digest`
    (what `write` returned), a file whose header or tensors differ from what was written raises
    ChangedTensorFile."""
    try:
        # O_NONBLOCK: a FIFO put in the file's place (the worker's scratch is its code's) must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise UnreadableTensorFile(f"cannot open: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableTensorFile("not a regular file")
        size = info.st_size
        prefix = os.pread(fd, len(MAGIC) + 8, 0)
        if len(prefix) < len(MAGIC) + 8 or prefix[:len(MAGIC)] != MAGIC:
            raise UnreadableTensorFile("not a tensor file")
        length = int.from_bytes(prefix[len(MAGIC):], "little")
        if length > MAX_HEADER or len(MAGIC) + 8 + length > size:
            raise UnreadableTensorFile("header out of bounds")
        head = os.pread(fd, length, len(MAGIC) + 8)
        try:
            header = json.loads(head)
        except ValueError:
            raise UnreadableTensorFile("header is not JSON") from None
        start = _aligned(len(MAGIC) + 8 + length)
        data = _mapped(fd, size)
    finally:
        os.close(fd)
    if not isinstance(header, list):
        raise UnreadableTensorFile("header is not a list")
    tensors = [tensor_at(entry, data, start, size) for entry in header]
    # In order and apart, as `write` lays them out: overlapping entries would have the bot hash (and compare) the
    # same bytes over and over, terabytes for a 1 MB header.
    end = 0
    for entry, t in zip(header, tensors):
        if entry["offset"] < end:
            raise UnreadableTensorFile("tensors overlap or are out of order")
        end = entry["offset"] + t.numel() * t.element_size()
    if digest is not None and _combine(head, _chunk_digests(tensors)) != digest:
        raise ChangedTensorFile("its content is not what the worker wrote")
    return tensors


def tensor_at(entry: object, data: torch.Tensor, start: int, size: int, align: int = ALIGN) -> torch.Tensor:
    """One header entry's tensor, a view of the flat uint8 `data` (a mapped file, or shared device memory): its
    dtype from the fixed list, its offset a multiple of `align`, its bytes inside `size`; a header is the
    candidate's word, so nothing in it is trusted."""
    if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
        raise UnreadableTensorFile("bad tensor entry")
    shape, offset = entry.get("shape"), entry.get("offset")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape) or type(offset) is not int:
        raise UnreadableTensorFile("bad shape or offset")
    dtype = DTYPES[entry["dtype"]]
    nbytes = math.prod(shape) * dtype.itemsize
    begin = start + offset
    if offset < 0 or offset % align or begin + nbytes > size:
        raise UnreadableTensorFile("tensor data out of bounds")
    return data[begin:begin + nbytes].view(dtype).reshape(shape)


def _mapped(fd: int, size: int) -> torch.Tensor:
    if size == 0:
        return torch.empty(0, dtype=torch.uint8)
    # A private copy-on-write mapping: reading costs no copy, and the tensors may be written without touching
    # the file; it stays valid after the file is deleted.
    buffer = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return torch.frombuffer(buffer, dtype=torch.uint8)


def _pinned_buffer() -> torch.Tensor | None:
    """The process's pinned staging buffer, made on first use; None where pinned memory cannot be had (the
    plain device-to-host copy is used then)."""
    if "cuda" not in _staging:
        try:
            _staging["cuda"] = torch.empty(CHUNK, dtype=torch.uint8, pin_memory=True)
        except RuntimeError:
            return None
    return _staging["cuda"]


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]
