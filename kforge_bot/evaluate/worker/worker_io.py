"""What the worker's entry point (kforge_bot.evaluate.worker.entry) and its roles share: its ways in and out.

- `Channel`: messages to the parent, as JSON lines carrying the request's nonce, over an inherited pipe.
- `Stop`: the verdict that ends a role early (compile_error, crash, rejected, incorrect, ...).
- The output sink: where a role's outputs go (files, or on a GPU shared device memory: evaluate.wire.outputs).
- The control lines that follow the request on stdin (a held worker's go, the candidate's Fit).

Everything here is bound when the worker imports it, before any user code exists.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from kforge_bot.evaluate.wire import checks
from kforge_bot.evaluate.wire.outputs import DeviceSink, FileSink

_write = os.write  # bound before user code exists
_stdin_readline = sys.stdin.readline  # the original stdin's: a candidate replacing sys.stdin cannot feed it
_stdin_close = sys.stdin.close
_dumps = json.dumps


class Channel:
    def __init__(self, fd: int, nonce: str) -> None:
        self.fd = fd
        self.nonce = nonce

    def send(self, kind: str, **payload: Any) -> None:
        line = _dumps({"nonce": self.nonce, "type": kind, **payload}, default=str) + "\n"
        data = line.encode()
        while data:
            written = _write(self.fd, data)
            data = data[written:]


class Stop(Exception):
    """Ends a role early with a verdict (the candidate's compile_error, crash, rejected, incorrect; the
    reference's unavailable, too_large). `side`: whose code failed, "baseline" where it was the baseline's
    (building it, or a call of it), else the candidate's."""

    def __init__(self, status: str, reason: str, detail: str = "", side: str = "candidate"):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.detail = detail
        self.side = side


def short_error(exc: BaseException) -> str:
    if isinstance(exc, Stop):
        return exc.reason  # the harness's own line (device_import.NeedsDevice), said as written
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # Compiler errors are long; keep the lines that say what went wrong.
    keep = [ln for ln in lines if "error" in ln.lower()] or lines
    return " | ".join(keep[:6])[:2000]


def is_compile_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    module = type(exc).__module__ or ""
    text = str(exc)
    return bool(
        names & {"CompilationError", "CompileTimeAssertionFailure", "SyntaxError", "ImportError",
                 "ModuleNotFoundError", "NameError", "InductorError", "BackendCompilerFailed"}
        or module.startswith("triton.compiler")
        or "Error building extension" in text
        or "ninja: build stopped" in text
        or "error: command" in text and "failed" in text
    )


def as_list(value: Any) -> list[Any]:
    return checks.flatten_outputs(value)


# ----------------------------------------------------------------------------------------- stdin


def read_control_line() -> str:
    """The next line on the original stdin (a held worker's go, the candidate's Fit)."""
    return _stdin_readline()


def close_stdin() -> None:
    _stdin_close()


# ------------------------------------------------------------------------------------------ outputs

_SINK: FileSink | DeviceSink = FileSink()  # set by the worker's main() from the request, before any user code runs


def use_sink(sink: FileSink | DeviceSink) -> None:
    global _SINK
    _SINK = sink


def save(outputs: list[Any], path: Path) -> str | None:
    """Saves one case's outputs; returns the file's digest, or None where they were handed over as device memory.
    The candidate's worker reports every digest with its result: its files lie in a folder its code can write."""
    return _SINK.save(outputs, path)


def export_tensors(tensors: list[Any], name: str) -> bool:
    """`tensors` handed to the parent as device memory under `name` (the reference's recorded inputs); False where
    outputs go through the host here (the caller writes a file)."""
    return isinstance(_SINK, DeviceSink) and _SINK.export(tensors, name)


def shared_receiver() -> Callable[[str], list[Any]] | None:
    """Where the parent's device memory for a recorded input arrives (evaluate.wire.shipped_device.receive): this
    worker's output socket, bound now, before any user code exists; None where outputs go through the host."""
    if not isinstance(_SINK, DeviceSink) or _SINK.unavailable:
        return None
    from kforge_bot.evaluate.wire.shipped_device import receive  # imports torch: the worker has it

    return functools.partial(receive, _SINK.socket, _SINK.device)


def device_outputs() -> bool:
    """Whether outputs stay on the device (shared memory) rather than pass through the host's."""
    return isinstance(_SINK, DeviceSink) and not _SINK.unavailable


def keep_outputs_on_device(allowed: bool) -> None:
    """The memory budget's word (plan.fit_plan): outputs too large to keep on the device go through the host."""
    if not allowed and isinstance(_SINK, DeviceSink):
        _SINK.unavailable = _SINK.unavailable or "the memory budget keeps outputs in host memory"
