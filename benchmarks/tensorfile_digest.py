"""What the host path's integrity digest costs (tensorfile.write / read with a digest), on this machine.

    python benchmarks/tensorfile_digest.py [--gib 1]

One core's SHA-256 rate; a write with and without a digest (the reference's worker writes none); a checked read
(the bot hashes the file's 64 MB chunks on every core) against one serial pass over the same bytes. Files in
/dev/shm, as the workers' are. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path

import torch

from kforge_bot.evaluate.wire import tensorfile


def _timed(fn):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    data = os.urandom(256 << 20)
    seconds, _ = _timed(lambda: hashlib.sha256(data).digest())
    print(f"sha256, one core: {len(data) / seconds / 1e9:.2f} GB/s")
    x = torch.randn(int(args.gib * (1 << 28)))
    folder = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    path = folder / "out.out"
    for digest in (True, False, True, False):  # twice each: the first write of a file also allocates its pages
        seconds, _ = _timed(lambda: tensorfile.write([x], path, digest))
        print(f"write {args.gib:g} GiB, digest {digest}: {seconds:.2f} s")
    digest = tensorfile.write([x], path)
    for _ in range(2):
        seconds, _ = _timed(lambda: tensorfile.read(path, digest))
        print(f"read and check {args.gib:g} GiB on {os.cpu_count()} cores: {seconds:.2f} s")
        seconds, _ = _timed(lambda: hashlib.sha256(memoryview(tensorfile.read(path)[0].view(torch.uint8).numpy())))
        print(f"read and one serial pass: {seconds:.2f} s")
    path.unlink()
    folder.rmdir()


if __name__ == "__main__":
    main()
