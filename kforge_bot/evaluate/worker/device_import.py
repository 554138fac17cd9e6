"""A library that needs a GPU to be imported, told apart from one that does not import at all.

Some Triton libraries query the device when imported (its properties, the active Triton driver, a vendor probe): on
a machine without a GPU their import raises from inside torch.cuda or Triton's driver, and "cannot import" would
send the user looking for a missing package. Where the worker has no accelerator and the failure came from such a
query (its traceback passes through the device runtime, or its message is one the runtimes give), the import's
failure is NeedsDevice: one line naming the library and what to do. Worker-side only.
"""

from __future__ import annotations

import re
import traceback
from types import TracebackType

import torch

from kforge_bot.evaluate.worker.worker_io import Stop

# Files of the runtimes that answer a device query: an exception raised through one of them was asking for a device.
DEVICE_RUNTIME_PATHS = ("/torch/cuda/", "/torch/xpu/", "/torch/mps/", "/triton/runtime/driver.py", "/triton/backends/")
# What the runtimes say when there is no device, wherever the library caught and re-raised it.
NO_DEVICE_TEXT = re.compile(
    r"Torch not compiled with (CUDA|XPU) enabled|Found no NVIDIA driver|No CUDA GPUs are available|"
    r"no CUDA-capable device|CUDA driver (version )?is insufficient|\d+ active drivers|libcuda\.so|"
    r"CUDA (is )?not available|no (GPU|CUDA device)s? (found|available)", re.IGNORECASE)
NEEDS_A_GPU_HINT = ("run it on a GPU runner; a kernel whose targets leave out cpu (targets: [cuda]) is skipped by "
                    "check on a CPU machine")


class NeedsDevice(Stop):
    """The trusted side's import (the kernel as written, its reference) needs a device this machine lacks. A
    Stop, so the worker reports its one line as such; a candidate's import that raises it is still the candidate's
    compile error (candidate_role.build catches every exception)."""

    def __init__(self, library: str, error: str):
        self.library = library
        super().__init__("crash", f"{library} needs a GPU to import: on this machine without one it raised {error} "
                                  f"({NEEDS_A_GPU_HINT})", side="baseline")


def has_accelerator() -> bool:
    """Whether this process sees a GPU of any kind torch knows."""
    if torch.cuda.is_available():
        return True
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return True
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def asks_for_device(exc: BaseException) -> bool:
    """Whether an exception (or one it was raised from) came out of a device query."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if NO_DEVICE_TEXT.search(str(current)) or _through_runtime(current.__traceback__):
            return True
        current = current.__cause__ or current.__context__
    return False


def _through_runtime(tb: TracebackType | None) -> bool:
    return any(any(part in frame.filename.replace("\\", "/") for part in DEVICE_RUNTIME_PATHS)
               for frame in traceback.extract_tb(tb))


def library_of(module: str, filename: str) -> str:
    """The library's name as a user knows it: a package's top-level name, else the file's."""
    return module.split(".")[0] if module else filename


def raise_if_needs_device(module: str, filename: str, exc: Exception, error: str) -> None:
    """NeedsDevice from `exc` where this machine has no GPU and the import failed asking for one; else nothing."""
    if not has_accelerator() and asks_for_device(exc):
        raise NeedsDevice(library_of(module, filename), error) from exc
