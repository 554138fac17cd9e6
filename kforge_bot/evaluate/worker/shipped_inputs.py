"""Inputs as data, for a head's worker that may import none of the base's files (issue 38, Plan.ship_inputs).

Under the gate the reference and the inputs come from the base's checkout, and often from the kernel's own file:
imported in the head's worker, the base's kernel code would run in the head's process. Instead the reference's
worker (trusted code only) records what the inputs' module gives: each input set keyed by its seed and keywords,
the constructor's arguments and the reference's weights for the listed sizes and for each held-out form, and the
fingerprint of the reference's forward. The head's worker builds from a stand-in inputs module (`ShippedInputs`)
that asks the parent for one file at the moment the harness would have made those inputs and loads it from its
inbox, read-only to its code (evaluate.shipping): no input set lies there before the call that uses it, as no input
set exists before it is made when the inputs' module runs in the worker.

Files hold tensors, numbers and containers only (torch.save), read back with `weights_only` (no code runs).
"""

from __future__ import annotations

import functools
import hashlib
import io
import marshal
import types
from pathlib import Path
from typing import Any, Callable

import torch

from kforge_bot.evaluate.wire import devshare, shipped_device
from kforge_bot.evaluate.wire.shipped import (FORWARD, INBOX, LISTED, init_name, inputs_name, skeleton_name, state_name,
                                              why_name)
from kforge_bot.evaluate.worker.worker_io import Stop


class NotShipped(LookupError):
    """The parent has no such file: the reference never made these inputs."""


def forward_fingerprint(obj: Any) -> str | None:
    """What a class's forward does, as text that survives the process: its bytecode, constants (nested code by
    their own fingerprints) and names. None where it has no Python forward."""
    cls = obj if isinstance(obj, type) else type(obj)
    code = getattr(getattr(cls, "forward", None), "__code__", None)
    return None if code is None else _code_digest(code)


def _code_digest(code: types.CodeType) -> str:
    consts = tuple(_code_digest(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts)
    return hashlib.sha256(marshal.dumps((code.co_code, consts, code.co_names))).hexdigest()


class Recorder:
    """In the reference's worker: the inputs' module's callables wrapped to record what they return, and the
    reference's weights and forward saved, each as a file in `folder`. `context` names the sizes being run."""

    def __init__(self, folder: Path, export: Callable[[list[torch.Tensor], str], bool] | None = None) -> None:
        self.folder = folder
        self.context = LISTED
        self.export = export  # on a GPU: tensors handed to the parent as device memory (worker_io.export_tensors)
        self.on_device = 0
        self.held_bytes = 0  # the device memory of the recordings handed over so far (the parent holds them)
        folder.mkdir(parents=True, exist_ok=True)

    def install(self, module: types.ModuleType, inputs_symbol: str, init_symbol: str) -> None:
        inputs = getattr(module, inputs_symbol, None)
        if callable(inputs):
            @functools.wraps(inputs)  # the signature stays the callable's (make_inputs reads its `device`)
            def recorded_inputs(**kwargs: Any) -> Any:
                values = inputs(**kwargs)
                self._save(values, inputs_name(torch.initial_seed(), kwargs, self.context))
                return values

            setattr(module, inputs_symbol, recorded_inputs)
        init = getattr(module, init_symbol, None) if init_symbol else None
        if callable(init):
            @functools.wraps(init)
            def recorded_init() -> Any:
                values = init()
                self._save(values, init_name(self.context))
                return values

            setattr(module, init_symbol, recorded_init)

    def weights(self, instance: Any) -> None:
        if isinstance(instance, torch.nn.Module):
            self._save(instance.state_dict(), state_name(self.context))

    def forward(self, obj: Any) -> None:
        self._save(forward_fingerprint(obj), FORWARD)

    def _save(self, value: Any, name: str) -> None:
        """`value` as the head's harness will read it (numpy's scalars and arrays as Python's and torch's); a value
        that cannot travel as data (a callable, an object) is no file but a reason (`why_name`), charged to the
        base where the head's harness asks for it."""
        value = _plain(value)
        if self.export is not None and self.on_device < shipped_device.MAX_RECORDED:
            parts = shipped_device.split(value)
            if parts is not None and shipped_device.room_for(parts[1], self.held_bytes) \
                    and self.export(parts[1], name):  # the tensors never cross the host
                torch.save(parts[0], self.folder / skeleton_name(name))
                self.on_device += 1
                self.held_bytes += shipped_device.nbytes(parts[1])
                return
        try:
            if _only_data(value):  # tensors, numbers and their containers: straight to the file (no copy in memory)
                torch.save(value, self.folder / name)
                return
            buffer = io.BytesIO()
            torch.save(value, buffer)
            torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)  # what the head's harness will do
        except Exception as exc:  # noqa: BLE001 - any reason it cannot travel: said, not raised
            (self.folder / name).unlink(missing_ok=True)
            (self.folder / why_name(name)).write_text(f"{type(exc).__name__}: {exc}"[:300])
            return
        (self.folder / name).write_bytes(buffer.getbuffer())


_DATA = (torch.Tensor, int, float, bool, str, bytes, complex, type(None), torch.dtype, torch.device)


def _plain(value: Any) -> Any:
    """numpy's scalars and arrays in a recorded value as Python's numbers and torch's tensors (the head's harness
    reads back only data; a constructor taking np.int64(dim) takes int(dim) as well)."""
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        items = [_plain(v) for v in value]
        return type(value)(items) if type(value) in (list, tuple) else items
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    module = type(value).__module__
    if module == "numpy" and hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    if module == "numpy" and hasattr(value, "__array__"):
        return torch.from_numpy(value)
    return value


def _only_data(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_only_data(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, (str, int)) and _only_data(v) for k, v in value.items())
    return isinstance(value, _DATA)


class StateHolder:
    """Shipped weights where build_callable takes a module to copy them from (only `state_dict` is read)."""

    def __init__(self, state: dict[str, torch.Tensor]) -> None:
        self._state = state

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self._state


class ShippedInputs(types.ModuleType):
    """In the head's worker: the inputs' module as the harness calls it (its inputs callable and its
    constructor-arguments callable), each answer a recorded file fetched from the parent (`fetch`)."""

    def __init__(self, inputs_symbol: str, init_symbol: str, fetch: Callable[[str], Any]) -> None:
        super().__init__("kforge_shipped_inputs")
        self.context = LISTED
        self._fetch = fetch
        setattr(self, inputs_symbol, self._inputs)
        if init_symbol:
            setattr(self, init_symbol, self._init)

    def _inputs(self, **kwargs: Any) -> Any:
        # make_inputs has seeded the generators
        return self._fetch(inputs_name(torch.initial_seed(), kwargs, self.context))

    def _init(self) -> Any:
        try:
            return self._fetch(init_name(self.context))
        except NotShipped:
            if self.context == LISTED:
                raise
            return self._fetch(init_name(LISTED))

    def weights(self) -> StateHolder | None:
        """The reference's weights for the current sizes; None where the reference is no module."""
        try:
            return StateHolder(self._fetch(state_name(self.context)))
        except NotShipped:
            return None

    def forward(self) -> str | None:
        """The reference's forward's fingerprint (None: it has none, or none was recorded)."""
        try:
            value = self._fetch(FORWARD)
        except NotShipped:
            return None
        return value if isinstance(value, str) else None


def fetcher(ask: Callable[[str], dict[str, Any]], scratch: Path, device: torch.device,
            receive: Callable[[str], list[torch.Tensor]] | None = None) -> Callable[[str], Any]:
    """`ask(name)` has the parent hand one recorded file into this worker's inbox (read-only to its code) and
    answers as evaluate.shipping.Stager does; the file is loaded from there (tensors on `device`). Where the reply
    says `device`, the file is the value's skeleton and `receive(name)` its tensors, sent as device memory
    (evaluate.wire.shipped_device)."""

    def fetch(name: str) -> Any:
        reply = ask(name)
        if not reply.get("ok"):
            if reply.get("unshippable"):
                raise Stop("crash", f"the base's {_what(name)} cannot be handed to the head's process as data: "
                                    f"{reply['unshippable']}", side="baseline")
            if reply.get("refused"):
                raise Stop("rejected", f"the reference's {_what(name)} could not be handed to the candidate's worker: "
                                       f"{reply['refused']}")
            raise NotShipped(f"the reference recorded no {name}")
        try:
            value = torch.load(scratch / INBOX / name, map_location=device, weights_only=True)
        except OSError as exc:
            raise Stop("rejected", f"the reference's {_what(name)} was gone from the candidate's inbox before the "
                                   f"harness read it ({exc.strerror})") from None
        if not reply.get("device"):
            return value
        try:
            if receive is None:
                raise devshare.DeviceShareError("this worker has no channel for device memory")
            return shipped_device.refill(value, receive(name))
        except (devshare.DeviceShareError, ValueError) as exc:
            raise Stop("rejected", f"the reference's {_what(name)} could not be handed to the candidate's worker as "
                                   f"device memory: {exc}") from None

    return fetch


def _what(name: str) -> str:
    kind = name.split("-", 1)[0].removesuffix(".pt")
    return {"in": "inputs", "init": "constructor's arguments", "state": "weights",
            "forward": "forward's fingerprint"}.get(kind, name)
