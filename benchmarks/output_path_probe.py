"""How an output gets from a worker to the bot, measured: through the host (today), or as shared device memory.

    python benchmarks/output_path_probe.py [--sizes-mb 512,2048] [--json FILE]

1. Through the host: `tensorfile.write` of a CUDA tensor to /dev/shm (a fresh file each time, as a worker
   does), then `tensorfile.read` and the copy back to the device (as the bot compares), per size, three times.
2. Shared device memory (`kforge_bot/evaluate/wire/devshare.py`): a child in the same bubblewrap sandbox the
   workers use (own PID namespace) copies a tensor into an exported allocation and hands its fd over a Unix
   socket; this process maps it and checks every byte against its own copy. Also: the child exits before the
   memory is read (the reference worker does), an fd that is not a CUDA allocation, and a claimed size larger
   than the allocation (both must fail to import).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from kforge_bot.environment import scrubbed_environment  # noqa: E402
from kforge_bot.evaluate.wire import devshare, tensorfile  # noqa: E402
from kforge_bot.evaluate import isolation

CHILD = r'''
import json, socket, sys, time, torch
from kforge_bot.evaluate.wire import devshare
sock = socket.socket(fileno=int(sys.argv[1]))
nbytes = int(sys.argv[2])
torch.cuda.init()
g = torch.Generator(device="cuda"); g.manual_seed(1234)
x = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device="cuda", generator=g)
t0 = time.monotonic()
buf = devshare.ExportedBuffer(nbytes, 0)
buf.tensor().copy_(x)
torch.cuda.synchronize()
fd = buf.export_fd()
export_s = time.monotonic() - t0
devshare.send_fds(sock, json.dumps({"size": buf.size, "nbytes": nbytes, "export_s": export_s,
                                    "pid": __import__("os").getpid()}).encode(), [fd])
sock.recv(16)  # "exit": before the bot reads the memory; "done": after
buf.close()
'''


def host_path(sizes_mb: list[int]) -> list[dict]:
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="kforge-probe-", dir="/dev/shm"))
    for mb in sizes_mb:
        x = torch.rand(mb * (1 << 20) // 4, device="cuda")
        for rep in range(3):
            path = folder / f"out{rep}.kft"
            torch.cuda.synchronize()
            t0 = time.monotonic()
            tensorfile.write([x], path)
            t1 = time.monotonic()
            back = tensorfile.read(path)[0]
            y = back.to("cuda")
            torch.cuda.synchronize()
            t2 = time.monotonic()
            ok = bool(torch.equal(x, y))
            path.unlink()
            del back, y
            rows.append({"mb": mb, "rep": rep, "write_s": round(t1 - t0, 3), "read_to_device_s": round(t2 - t1, 3),
                         "gbs_write": round(mb / 1024 / (t1 - t0), 2), "equal": ok})
            print(f"host path {mb} MB rep {rep}: write {t1 - t0:.3f} s, read+H2D {t2 - t1:.3f} s, equal {ok}",
                  flush=True)
        del x
    os.rmdir(folder)
    return rows


def _child(nbytes: int, sandboxed: bool) -> tuple[subprocess.Popen, socket.socket, Path]:
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    scratch = Path(tempfile.mkdtemp(prefix="kforge-probe-child-"))
    argv = [sys.executable, "-c", CHILD, str(theirs.fileno()), str(nbytes)]
    env = scrubbed_environment()
    if sandboxed:
        view = isolation.View(scratch=scratch, readable=(ROOT,), devices="cuda")
        env = isolation.environment(env, view)
        argv = isolation.command(argv, view)
    proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), env=env, cwd=scratch)
    theirs.close()
    return proc, mine, scratch


def shared_path(sizes_mb: list[int], sandboxed: bool) -> list[dict]:
    rows = []
    for mb in sizes_mb:
        nbytes = mb * (1 << 20)
        for child_exits_first in ("no", "after import", "before import"):
            t0 = time.monotonic()
            proc, sock, _ = _child(nbytes, sandboxed)
            message, fds = devshare.receive_fds(sock)
            got = time.monotonic()
            meta = json.loads(message)
            row = {"mb": mb, "sandboxed": sandboxed, "child_exits_first": child_exits_first,
                   "child_pid_seen": meta["pid"], "export_s": round(meta["export_s"], 4)}
            try:
                if child_exits_first == "before import":  # the fd alone must keep the allocation alive
                    sock.sendall(b"exit")
                    proc.wait(timeout=60)
                    row["child_returncode"] = proc.returncode
                t1 = time.monotonic()
                imported = devshare.ImportedBuffer(fds[0], meta["size"], 0)
                devshare.close_all(fds)
                t2 = time.monotonic()
                if child_exits_first == "after import":
                    sock.sendall(b"exit")
                    proc.wait(timeout=60)
                    row["child_returncode"] = proc.returncode
                view = imported.tensor(nbytes)
                g = torch.Generator(device="cuda")
                g.manual_seed(1234)
                expected = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device="cuda", generator=g)
                torch.cuda.synchronize()
                t3 = time.monotonic()
                same = bool(torch.equal(view, expected))
                snapshot = view.clone()
                torch.cuda.synchronize()
                t4 = time.monotonic()
                row.update(import_map_s=round(t2 - t1, 4), compare_and_clone_s=round(t4 - t3, 4), equal=same,
                           snapshot_equal=bool(torch.equal(snapshot, expected)), child_start_to_fd_s=round(got - t0, 2))
                del view, snapshot, expected
                imported.close()
            except Exception as exc:  # noqa: BLE001 - the probe reports what failed
                row["error"] = f"{type(exc).__name__}: {exc}"
            finally:
                if proc.poll() is None:
                    sock.sendall(b"done")
                    proc.wait(timeout=60)
                sock.close()
            print("shared path", json.dumps(row), flush=True)
            rows.append(row)
    return rows


def hostile_fds() -> list[dict]:
    rows = []
    r, w = os.pipe()
    try:
        devshare.ImportedBuffer(r, devshare.padded_size(1 << 21), 0)
        rows.append({"case": "pipe fd", "imported": True})
    except devshare.DeviceShareError as exc:
        rows.append({"case": "pipe fd", "imported": False, "error": str(exc)})
    finally:
        os.close(r)
        os.close(w)
    small = devshare.ExportedBuffer(1 << 21, 0)
    fd = small.export_fd()
    try:
        devshare.ImportedBuffer(fd, devshare.padded_size(1 << 30), 0)
        rows.append({"case": "claimed 1 GiB of a 2 MiB allocation", "imported": True})
    except devshare.DeviceShareError as exc:
        rows.append({"case": "claimed 1 GiB of a 2 MiB allocation", "imported": False, "error": str(exc)})
    finally:
        os.close(fd)
        small.close()
    for row in rows:
        print("hostile", json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes-mb", default="512,2048")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes_mb.split(",")]
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    data = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "supported": devshare.supported(0) or "yes",
            "sandbox": isolation.probe().describe()}
    print(json.dumps(data), flush=True)
    data["host_path"] = host_path(sizes)
    for sandboxed in (False, True):
        try:
            data[f"shared_path_{'sandboxed' if sandboxed else 'plain'}"] = shared_path(sizes, sandboxed)
        except Exception as exc:  # noqa: BLE001
            print(f"shared path (sandboxed={sandboxed}) failed: {type(exc).__name__}: {exc}", flush=True)
    try:
        data["hostile"] = hostile_fds()
    except Exception as exc:  # noqa: BLE001
        print(f"hostile cases failed: {type(exc).__name__}: {exc}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
