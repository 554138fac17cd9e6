"""The child process that runs one workload once: `kforge_bot.workloads.worker.main` (started by
kforge_bot.evaluate.sandbox.WorkerProcess, sandboxed as every worker is; the request arrives on stdin).

One process is one side of a measurement: it imports the program (from the base's checkout) with the kernel
modules the request names taken from another checkout (the head's), builds the inputs from the seed, calls the
entry `warmup` times untimed (compilation and caches; each call's time is reported), keeps the first call's output
for the comparison and says it is ready. Then it runs samples on command, one control line on stdin each
(`{"calls": k}`: k calls back to back, then one device synchronization), until a `stop` line or the end of stdin.
The parent times each sample on its own clock, from its command to the answer: the process cannot report a time
shorter than it took. Messages go over the harness's channel (kforge_bot.evaluate.worker.worker_io).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

import torch

from kforge_bot.evaluate.wire import limits
from kforge_bot.evaluate.worker.syscall_filter import forbid_keyrings
from kforge_bot.evaluate.worker.worker_io import Channel, close_stdin, read_control_line, short_error

_exit = os._exit  # bound before user code exists
MAX_OUTPUT_VALUES = 1 << 20  # what one output may hold to be compared: return the last position's logits


class _Overlay(importlib.abc.MetaPathFinder):
    """Imports the named modules from the given files (the head's kernels) wherever sys.path would find them."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> Any:
        file = self.files.get(fullname)
        if file is None:
            return None
        is_package = os.path.basename(file) == "__init__.py"
        return importlib.util.spec_from_file_location(
            fullname, file, submodule_search_locations=[os.path.dirname(file)] if is_package else None)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device.startswith("xpu"):
        torch.xpu.synchronize()


def output_record(value: Any) -> dict[str, Any]:
    """The output of a call as plain data for the comparison: its values, flattened, and its shape."""
    if isinstance(value, (list, tuple)):
        value = value[0] if len(value) == 1 else torch.as_tensor(value)
    if not isinstance(value, torch.Tensor):
        value = torch.as_tensor(value)
    if value.numel() > MAX_OUTPUT_VALUES:
        raise ValueError(f"the output has {value.numel()} values, at most {MAX_OUTPUT_VALUES} are compared: "
                         "return the last position's logits or the generated tokens")
    flat = value.detach().reshape(-1).cpu()
    integral = not (flat.is_floating_point() or flat.is_complex())
    data = flat.tolist() if integral else flat.double().tolist()
    return {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", ""), "values": data}


def run(request: dict[str, Any], channel: Channel) -> None:
    device = request["device"]
    sys.path[:0] = request["paths"]
    if request.get("overlay"):
        sys.meta_path.insert(0, _Overlay(request["overlay"]))
    if request.get("threads"):
        torch.set_num_threads(int(request["threads"]))
    began = time.monotonic()
    program = importlib.import_module(request["module"])
    entry = getattr(program, request["entry"])
    make = getattr(importlib.import_module(request["inputs_module"]), request["inputs_symbol"])
    imported = time.monotonic()
    torch.manual_seed(request["seed"])
    inputs = make(seed=request["seed"], device=device, **request["args"])
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    _sync(device)
    built = time.monotonic()
    warmup_ms, output = [], None
    for i in range(request["warmup"]):
        start = time.perf_counter()
        out = entry(*inputs)
        _sync(device)
        warmup_ms.append((time.perf_counter() - start) * 1e3)
        if i == 0:
            output = output_record(out)
    channel.send("ready", warmup_ms=warmup_ms, output=output, import_s=round(imported - began, 3),
                 setup_s=round(built - imported, 3))
    samples = 0
    while True:
        line = read_control_line().strip()
        if not line or line == "stop":
            break
        calls = int(json.loads(line)["calls"])
        start = time.perf_counter()
        for _ in range(calls):
            entry(*inputs)
        _sync(device)
        samples += 1
        channel.send("sample", calls=calls, own_ms=(time.perf_counter() - start) * 1e3)
    channel.send("result", status="ok", samples=samples)


def main(argv: list[str]) -> int:
    fd = int(argv[0].partition(":")[0])
    forbid_keyrings()  # before any user code (evaluate.worker.syscall_filter)
    nonce = sys.stdin.readline().strip()
    channel = Channel(fd, nonce)
    request = json.loads(sys.stdin.readline())
    if request.get("limits"):
        limits.apply(limits.Limits.from_dict(request["limits"]))  # before any user code
    try:
        run(request, channel)
    except Exception as exc:  # noqa: BLE001 - the workload's own failure, reported as its result
        channel.send("result", status="error", reason=short_error(exc), detail=traceback.format_exc()[-4000:])
    close_stdin()
    sys.stdout.flush()
    sys.stderr.flush()
    _exit(0)
    return 0  # pragma: no cover
