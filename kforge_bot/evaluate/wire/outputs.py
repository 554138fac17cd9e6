"""How a worker's outputs reach the bot: as files (tensorfile), or on a GPU as shared device memory (devshare).

The worker saves each case's outputs under a name the plan fixed (`ref_0_0.out`, `cand_t1_2.out`, ...). On a
CUDA target whose driver can export memory as file descriptors, `DeviceSink` copies them into one exported
allocation per name and sends its fd, with a header, over a Unix socket of its own (SOCK_SEQPACKET: one
message, one fd); the bot's `SharedOutputs` collects them while the worker runs and maps one when it is
compared. Nothing crosses the host, so a 6.4 GB output costs a device-to-device copy, not seconds of host
traffic. Anywhere else (the CPU, a driver without the API, a tensor not on the device) the outputs travel as
files, and the bot reads whichever came.

A candidate's worker sends these messages; the bot trusts none of them: each must carry the request's nonce,
hold exactly one fd, name an expected output once, and describe tensors that lie inside the allocation,
which must itself be at least as large as claimed (devshare maps no more than exists).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Any, Callable

from kforge_bot.evaluate.wire import devshare
from kforge_bot.targets import target_index

ALIGN = 256  # each tensor of an output starts at a multiple of this (any dtype's alignment, and the L2 line)
MAX_MESSAGE_BYTES = 1 << 16
MAX_SHARED = 256  # outputs one worker may hand over (a plan writes well under 100; each holds an fd in the bot)


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def layout(tensors: list[Any]) -> tuple[list[dict[str, Any]], int]:
    """Each tensor's header entry (dtype, shape, offset) in one allocation, and the bytes that allocation needs."""
    header, offset = [], 0
    for t in tensors:
        header.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "offset": offset})
        offset = _aligned(offset + t.numel() * t.element_size())
    return header, max(offset, ALIGN)


# ----------------------------------------------------------------------------------------- worker side


class FileSink:
    """Outputs as tensor files in the worker's output folder; `digest` False for a trusted worker (the
    reference's), whose folder no candidate can reach: hashing an 8.6 GB output costs seconds."""

    def __init__(self, digest: bool = True) -> None:
        # Bound when the worker makes its sink, before any user code exists. Imported at the first save, after
        # hide_harness, the module would be whichever copy the candidate had put in sys.modules by then.
        from kforge_bot.evaluate.wire import tensorfile  # imports torch: the worker has it, the bot makes no sink

        self._write = tensorfile.write
        self._digest = digest

    def save(self, tensors: list[Any], path: Path) -> str:
        """Returns the file's digest (tensorfile.write): the bot reads the file only if it still matches."""
        return self._write(tensors, path, self._digest)


class DeviceSink:
    """Outputs as exported device memory, one allocation per output name; files where that cannot be done."""

    def __init__(self, sock: socket.socket, nonce: str, device: int, digest: bool = True) -> None:
        import torch  # the worker's, bound before any user code (see FileSink); the bot makes no sink

        self._sock, self._nonce, self._device = sock, nonce, device
        self._files = FileSink(digest)
        self._torch = torch
        devshare.bind_torch()
        self.unavailable = devshare.supported(device)  # None: the device can export

    @property
    def socket(self) -> socket.socket:
        """The worker's end of the channel (the parent's recorded inputs arrive on it too)."""
        return self._sock

    @property
    def device(self) -> int:
        return self._device

    def save(self, tensors: list[Any], path: Path) -> str | None:
        """The file's digest where the outputs went to a file; None where they were handed over."""
        if self.unavailable or not tensors or any(t.device.type != "cuda" for t in tensors):
            return self._files.save(tensors, path)
        try:
            self._export(tensors, path.name)
        except devshare.DeviceShareError as exc:
            self.unavailable = str(exc)  # out of device memory for another copy, say: files from here on
            return self._files.save(tensors, path)
        return None

    def export(self, tensors: list[Any], name: str) -> bool:
        """`tensors` handed over as device memory under `name` (the reference's recorded inputs use this too,
        evaluate.wire.shipped_device); False where that cannot be done here (the caller writes a file)."""
        if self.unavailable:
            return False
        try:
            self._export(tensors, name)
        except devshare.DeviceShareError as exc:
            self.unavailable = str(exc)
            return False
        return True

    def _export(self, tensors: list[Any], name: str) -> None:
        torch = self._torch
        header, size = layout(tensors)
        buffer = devshare.ExportedBuffer(size, self._device)
        try:
            whole = buffer.tensor()
            for entry, t in zip(header, tensors):
                flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
                whole[entry["offset"]:entry["offset"] + flat.numel()].copy_(flat)
            torch.cuda.synchronize(self._device)
            del whole
            fd = buffer.export_fd()
            try:
                devshare.send_fds(self._sock, share_message(name, buffer.size, header, self._nonce), [fd])
            finally:
                os.close(fd)
        finally:
            buffer.close()  # the fd on its way keeps the allocation alive; this process's mapping goes now


def share_message(name: str, size: int, header: list[dict[str, Any]], nonce: str = "") -> bytes:
    """What travels with an allocation's fd: whose it is, how large, and the tensors in it."""
    return json.dumps({"nonce": nonce, "name": name, "size": size, "tensors": header}).encode()


def make_sink(output_fd: int | None, nonce: str, target: str, trusted: bool = False) -> FileSink | DeviceSink:
    """`trusted`: the reference's worker, whose files need no digest."""
    if output_fd is None or not target.startswith("cuda"):
        return FileSink(digest=not trusted)
    sock = socket.socket(fileno=output_fd)
    return DeviceSink(sock, nonce, target_index(target), digest=not trusted)


# -------------------------------------------------------------------------------------------- bot side


def channel() -> tuple[socket.socket, socket.socket]:
    """(the bot's end, the worker's end) of an output channel."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


class SharedOutputs:
    """The outputs one worker handed over as device memory, collected by a thread as they arrive.

    `nonce` is read when a message arrives (the request, and with it the nonce, may be sent after the worker
    starts). `take(name)` maps one output (once) and returns its tensors; everything not taken is closed by
    `close()`, and a mapped output is unmapped when its last tensor is freed."""

    def __init__(self, sock: socket.socket, target: str) -> None:
        self._sock = sock
        self._device = target_index(target)
        self._received: dict[str, tuple[dict[str, Any], int]] = {}
        self._nonce: str | None = None
        self.rejected: str = ""  # the first message that broke the rules, and how
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._collect, name="kforge-shared-outputs", daemon=True)
        self._thread.start()

    def expect(self, nonce: str) -> None:
        self._nonce = nonce

    def _collect(self) -> None:
        while True:
            try:
                message, fds = devshare.receive_fds(self._sock, MAX_MESSAGE_BYTES)
            except OSError:
                return
            if not message and not fds:
                return  # every worker-side end is closed
            problem = self._accept(message, fds)
            if problem:
                devshare.close_all(fds)
                with self._lock:
                    self.rejected = self.rejected or problem

    def _accept(self, message: bytes, fds: list[int]) -> str | None:
        try:
            data = json.loads(message)
        except (ValueError, UnicodeDecodeError):
            return "an output message that is not JSON"
        if not isinstance(data, dict) or self._nonce is None or data.get("nonce") != self._nonce:
            return "an output message without the request's nonce"
        name, size, tensors = data.get("name"), data.get("size"), data.get("tensors")
        if len(fds) != 1 or not isinstance(name, str) or type(size) is not int or not isinstance(tensors, list):
            return f"a malformed output message ({len(fds)} fds)"
        with self._lock:
            if name in self._received:
                return f"output {name!r} handed over twice"
            if len(self._received) >= MAX_SHARED:
                return f"over {MAX_SHARED} outputs handed over"
            self._received[name] = (data, fds[0])
        return None

    def names(self) -> set[str]:
        with self._lock:
            return set(self._received)

    def take(self, name: str) -> list[Any] | None:
        """The output's tensors on the device, or None when it was not handed over this way. Raises
        devshare.DeviceShareError (or ValueError) when what was handed over is not what it claims."""
        with self._lock:
            entry = self._received.pop(name, None)
        if entry is None:
            return None
        data, fd = entry
        try:
            imported = devshare.ImportedBuffer(fd, data["size"], self._device)
        finally:
            os.close(fd)
        return _tensors(imported, data["tensors"])

    def take_whole(self, accept: Callable[[str], bool]) -> dict[str, tuple[Any, list[Any]]]:
        """Every allocation handed over under a name `accept` takes (the reference's recorded inputs,
        evaluate.wire.shipped_device), mapped whole: {name: (uint8 tensor on the device, header)}."""
        with self._lock:
            names = [name for name in self._received if accept(name)]
            taken = [(name, self._received.pop(name)) for name in names]
        kept: dict[str, tuple[Any, list[Any]]] = {}
        for name, (data, fd) in taken:
            try:
                imported = devshare.ImportedBuffer(fd, data["size"], self._device)
            except devshare.DeviceShareError:
                continue  # lost: a head that asks for it is told so (evaluate.shipping)
            finally:
                os.close(fd)
            kept[name] = (imported.tensor(imported.size), data["tensors"])
        return kept

    def send(self, message: bytes, fds: list[int]) -> None:
        """One message and its fds to the worker (the socket carries both ways)."""
        devshare.send_fds(self._sock, message, fds)

    def close(self) -> None:
        """Stop collecting and close every fd not taken (their memory is freed once no one holds it)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(timeout=5)
        self._sock.close()
        with self._lock:
            left, self._received = self._received, {}
        devshare.close_all([fd for _, fd in left.values()])


def _tensors(imported: devshare.ImportedBuffer, header: list[Any]) -> list[Any]:
    from kforge_bot.evaluate.wire.tensorfile import tensor_at  # imports torch: the bot does when it compares

    whole = imported.tensor(imported.size)
    return [tensor_at(entry, whole, 0, imported.size, align=ALIGN) for entry in header]


def load(folder: Path, name: str, shared: SharedOutputs | None, digest: str | None = None) -> list[Any]:
    """One saved output: from shared device memory where it came that way, else from its file (deleted once
    read: the pages stay mapped while its tensors live, and nothing is left on disk). `digest`: what the worker
    reported writing; a file that no longer matches raises tensorfile.ChangedTensorFile."""
    from kforge_bot.evaluate.wire import tensorfile  # imports torch: the bot does when it compares

    tensors = shared.take(name) if shared is not None else None
    if tensors is not None:
        return tensors
    return tensorfile.read(folder / name, digest)
