"""Recorded inputs that travel as device memory (Plan.ship_inputs on a GPU; issue 38).

Through files, every recorded input set crossed the host twice: the reference's worker copied it to the host and
wrote it, the head's worker read it and copied it back. On the H200 that made a gate decision 2.5x slower than with
base and head in one worker (benchmarks/results/gate_decision_cost_h200.md). A value whose tensors all lie on the
CUDA device is split instead into a skeleton (the value with each tensor replaced by a meta tensor of its shape,
dtype and requires_grad: a small file, read back with `weights_only`) and its tensors, which the reference's worker
hands the parent as one exported allocation (evaluate.wire.devshare), as it hands over outputs. For each request the
parent copies the recording into a fresh allocation of the head's own (nothing a head writes reaches the recording)
and sends its fd; the head's worker maps it, copies the tensors into its own memory and lets the mapping go.

Values with anything else in them (tensors on the host, views sharing storage, subclasses, non-contiguous layouts)
stay whole files: the file path keeps torch.save's fidelity for what this one would flatten.
"""

from __future__ import annotations

import json
import select
import socket
from collections import OrderedDict
from typing import Any

import torch

from kforge_bot.evaluate.wire import devshare
from kforge_bot.evaluate.wire.outputs import ALIGN, MAX_MESSAGE_BYTES
from kforge_bot.evaluate.wire.tensorfile import UnreadableTensorFile, tensor_at

MIN_BYTES = 1 << 20  # smaller values stay files: an allocation, an fd and two mappings cost more than the write
MAX_RECORDED = 128  # recordings one reference's worker hands over this way (each holds an fd in the parent)
# The device memory the parent may hold as recordings, as a share of the device's: the rest stay files. Held without
# a bound, four 8.6 GB input sets of KernelBench L1 47 took 33 GB of an H100's 80 beside the two workers' own, and
# the head's copy of the next found no room; with a quarter, the copy sent to the head (held until it asks for the
# next) and the base's fresh inputs for a sample still found none in one run of two
# (benchmarks/results/gate_hidden_work_h100.md).
MAX_HELD_SHARE = 0.125


class _Unfit(Exception):
    pass


def _map_tensors(item: Any, on_tensor: Any) -> Any:
    """`item` rebuilt with each tensor replaced by on_tensor(tensor), in walk order, through lists, tuples and
    dicts (a state_dict's OrderedDict too); any other container (a named tuple, say) raises _Unfit: torch.save keeps
    what it is, this would not."""
    if isinstance(item, torch.Tensor):
        return on_tensor(item)
    if type(item) in (list, tuple):
        return type(item)(_map_tensors(x, on_tensor) for x in item)
    if type(item) in (dict, OrderedDict):
        return type(item)((k, _map_tensors(x, on_tensor)) for k, x in item.items())
    if isinstance(item, (list, tuple, dict)) and not isinstance(item, torch.Size):
        raise _Unfit
    return item


def split(value: Any, device_type: str = "cuda") -> tuple[Any, list[torch.Tensor]] | None:
    """(skeleton, tensors in walk order) where `value` may travel as device memory (every tensor on a
    `device_type` device); None where it stays a file."""
    tensors: list[torch.Tensor] = []

    def to_meta(item: torch.Tensor) -> torch.Tensor:
        if type(item) is not torch.Tensor or item.device.type != device_type or not item.is_contiguous():
            raise _Unfit
        tensors.append(item)
        return torch.empty(item.shape, dtype=item.dtype, device="meta", requires_grad=item.requires_grad)

    try:
        skeleton = _map_tensors(value, to_meta)
    except _Unfit:
        return None
    storages = {t.untyped_storage().data_ptr() for t in tensors}
    if not tensors or len(storages) != len(tensors) or nbytes(tensors) < MIN_BYTES:
        return None  # aliased inputs keep their aliasing only through torch.save
    return skeleton, tensors


def room_for(tensors: list[torch.Tensor], held_bytes: int) -> bool:
    """Whether the parent may hold `tensors` as device memory beside the `held_bytes` of recordings it holds
    already: MAX_HELD_SHARE of their device's memory."""
    return held_bytes + nbytes(tensors) <= MAX_HELD_SHARE * _device_bytes(tensors[0].device)


def nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(_nbytes(t) for t in tensors)


def _device_bytes(device: torch.device) -> int:
    return int(torch.cuda.get_device_properties(device).total_memory)


def refill(skeleton: Any, tensors: list[torch.Tensor]) -> Any:
    """The value again: each meta tensor of `skeleton`, in walk order, replaced by the next of `tensors` (same shape
    and dtype, else ValueError), with the skeleton's requires_grad."""
    given = iter(tensors)

    def fill(item: torch.Tensor) -> torch.Tensor:
        if item.device.type != "meta":
            return item
        tensor = next(given, None)
        if tensor is None or tensor.shape != item.shape or tensor.dtype != item.dtype:
            raise ValueError("the handed-over tensors do not match the recorded value's")
        return tensor.requires_grad_(item.requires_grad) if item.requires_grad else tensor

    try:
        value = _map_tensors(skeleton, fill)
    except _Unfit:
        raise ValueError("the recorded skeleton holds a container split never writes") from None
    if next(given, None) is not None:
        raise ValueError("more tensors were handed over than the recorded value holds")
    return value


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


# ------------------------------------------------------------------------------------------ the parent


def fresh_copy(whole: torch.Tensor, device: int) -> tuple[int, devshare.ExportedBuffer]:
    """A new exported allocation holding `whole`'s bytes (a recording, mapped in the parent), as (fd, buffer): what
    a head's worker maps is its own, so nothing it writes there reaches the recording. The caller closes the buffer
    once the head has mapped its copy (shipping.Stager: at the next request or the evaluation's end), so the
    allocation never rests on the fd in flight alone."""
    buffer = devshare.ExportedBuffer(whole.numel(), device)
    try:
        mine = buffer.tensor()
        mine.copy_(whole[:mine.numel()])
        torch.cuda.synchronize(device)
        del mine
        return buffer.export_fd(), buffer
    except BaseException:
        buffer.close()
        raise


def whole_value(skeleton: Any, whole: torch.Tensor, header: list[dict[str, Any]]) -> Any:
    """The recorded value itself, each tensor a copy out of `whole` in host memory (the parent's fallback to a file,
    taken where the device has no room for another copy: on an H100 a KernelBench L1 47 input set of 8.6 GB failed
    to go either way; torch.save would write all of `whole` for each view, and refuses views of one buffer as
    different dtypes)."""
    return refill(skeleton, [tensor_at(entry, whole, 0, whole.numel(), align=ALIGN).to("cpu", copy=True)
                             for entry in header])


# ------------------------------------------------------------------------------------------ the head


def receive(sock: socket.socket, device: int, name: str, timeout_s: float = 30.0) -> list[torch.Tensor]:
    """The tensors the parent sent for `name` on this worker's output socket, copied into this process's own memory
    (the mapping goes once they are copied). Raises DeviceShareError where nothing usable came."""
    ready, _, _ = select.select([sock], [], [], timeout_s)
    if not ready:
        raise devshare.DeviceShareError(f"no device memory arrived for {name} in {timeout_s:.0f} s")
    data, fds = devshare.receive_fds(sock, MAX_MESSAGE_BYTES)
    try:
        parsed = json.loads(data)
        if len(fds) != 1 or not isinstance(parsed, dict) or parsed.get("name") != name \
                or type(parsed.get("size")) is not int or not isinstance(parsed.get("tensors"), list):
            raise devshare.DeviceShareError(f"the device memory handed over for {name} was not the file asked for")
        imported = devshare.ImportedBuffer(fds[0], parsed["size"], device)
    except ValueError as exc:
        raise devshare.DeviceShareError(f"an unreadable hand-over message for {name}: {exc}") from None
    finally:
        devshare.close_all(fds)
    whole = imported.tensor(parsed["size"])
    try:
        return [tensor_at(entry, whole, 0, parsed["size"], align=ALIGN).clone() for entry in parsed["tensors"]]
    except UnreadableTensorFile as exc:
        raise devshare.DeviceShareError(f"the device memory handed over for {name}: {exc}") from None
