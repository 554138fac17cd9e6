"""The parent's half of shipped inputs (Plan.ship_inputs, evaluate.worker.shipped_inputs): each file a head's worker
asks for, handed from the reference's recorded folder (out of every worker's view) into that worker's inbox, one at
a time, when its harness asks.

The inbox is the folder of the worker's scratch its sandbox shows read-only (isolation.inbox_folder): the head's
code can neither write a handed-over file nor put anything in its place, so the file is a hard link to the recorded
one (no copy, no digest: on an H100 copying and hashing each input set made a gate decision 4x slower) and what the
harness reads is what the reference wrote. Before each file the last one goes: no input set lies there before the
call that uses it. Unsandboxed (`isolation: off`) the inbox is as writable as the rest, and whatever is in it is
removed, never followed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable

from kforge_bot.evaluate.isolation import inbox_folder
from kforge_bot.evaluate.wire.outputs import share_message
from kforge_bot.evaluate.wire.shipped import skeleton_name, valid_name, why_name


class Stager:
    """Answers a head worker's `need_inputs` messages (evaluate.pair_driver.RemoteSide) from `recorded`, and from
    `on_device` (recordings kept as device memory: each request gets a fresh copy, sent with `send` on the head's
    output channel; evaluate.wire.shipped_device). `handed` counts what went which way (the result says it)."""

    def __init__(self, recorded: Path, scratch: Path, on_device: dict[str, tuple[Any, list[Any]]] | None = None,
                 send: Callable[[bytes, list[int]], None] | None = None, device: int = 0) -> None:
        self.recorded, self.inbox = recorded, inbox_folder(scratch)
        self.on_device, self.send, self.device = on_device or {}, send, device
        self.handed = {"device": 0, "file": 0}
        self._sent: Any = None  # the copy last sent, held until the head has asked for another (or close())

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """The control line that answers one request: {"op": "staged", "file", "ok"}; where not handed over,
        "unshippable" (the base's value cannot travel as data) or "refused" (the inbox would not take it), each a
        reason in words."""
        name = message.get("file")
        reply: dict[str, Any] = {"op": "staged", "file": name if isinstance(name, str) else "", "ok": False}
        if not valid_name(name):
            return reply
        name = str(name)
        recording = self.on_device.get(name)
        source = self.recorded / (skeleton_name(name) if recording is not None else name)
        if not source.is_file():
            why = self.recorded / why_name(name)
            if why.is_file():
                reply["unshippable"] = why.read_text(errors="replace")[:300]
            elif (self.recorded / skeleton_name(name)).is_file():  # its device memory did not reach the parent
                reply["refused"] = "the reference's recording of it was lost on its way to the bot"
            return reply
        try:
            self.inbox.mkdir(exist_ok=True)
            _empty(self.inbox)
            _hand_over(source, self.inbox / name)
            if recording is not None:  # the skeleton lies in the inbox; its tensors go to the channel
                reply["device"] = self._send_copy(name, recording)
                if not reply["device"]:  # no channel, or no device memory for a copy: the whole value as a file
                    _empty(self.inbox)
                    _hand_over(self.recorded / name, self.inbox / name)
        except OSError as exc:  # a full disk, or (unsandboxed) something of the head's in the way
            reply["refused"] = f"{type(exc).__name__}: {exc.strerror or exc}"[:300]
            return reply
        self.handed["device" if reply.get("device") else "file"] += 1
        reply["ok"] = True
        return reply

    def _send_copy(self, name: str, recording: tuple[Any, list[Any]]) -> bool:
        """A fresh copy of the recording sent to the head's channel; False where it cannot be, and from then on the
        recording is a whole file in `recorded` (written here once)."""
        from kforge_bot.evaluate.wire import devshare, shipped_device  # torch: imported only on a GPU's path

        whole, header = recording
        if self.send is not None:
            try:
                # The head asks for a set only once it holds the one before (its harness copies each into its
                # own memory on arrival), so the copy sent before this request is no longer read.
                self.close()
                fd, self._sent = shipped_device.fresh_copy(whole, self.device)
                try:
                    self.send(share_message(name, self._sent.size, header), [fd])
                finally:
                    os.close(fd)
                return True
            except (devshare.DeviceShareError, RuntimeError):  # RuntimeError: torch's out of device memory
                pass
        if not (self.recorded / name).is_file():
            import torch

            skeleton = torch.load(self.recorded / skeleton_name(name), weights_only=True)
            partial = self.recorded / f"{name}.partial"
            torch.save(shipped_device.whole_value(skeleton, whole, header), partial)
            os.replace(partial, self.recorded / name)
        self.on_device.pop(name, None)  # shared by every head of this reference: a file for all from here on
        return False

    def close(self) -> None:
        """The last copy sent let go (the evaluation's end; the head's worker has ended or mapped it)."""
        sent, self._sent = self._sent, None
        if sent is not None:
            sent.close()


def _empty(folder: Path) -> None:
    """Everything in `folder` removed, nothing followed (a link goes, not what it points at)."""
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _hand_over(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:  # another filesystem: a copy
        shutil.copyfile(source, dest, follow_symlinks=False)
