"""What a kernel's result depends on at a revision: the gate measures a kernel only when this differs between
base and head (the PR bot finds its changed kernels the same way)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kforge_bot.cache import file_digests, local_closure, portable
from kforge_bot.kernels import Kernel
from kforge_bot.spec import kernel_implementation


def dependencies(kernel: Kernel, checkout: Path) -> list[Path]:
    """The kernel's, reference's and inputs' files and every local file they import."""
    checkout = checkout.resolve()
    roots = [Path(kernel.spec.root)] if kernel.spec is not None else [checkout]
    return local_closure([checkout / s for s in kernel.sources], roots, checkout)


def material(kernel: Kernel, checkout: Path) -> dict[str, Any]:
    """What the kernel's result depends on at this revision, free of checkout locations."""
    data: dict[str, Any] = {"files": file_digests(dependencies(kernel, checkout), checkout)}
    if kernel.spec is not None:
        spec = kernel.spec.to_dict()
        spec.pop("name", None)
        data["spec"] = portable(spec)
        data["timed"] = portable(kernel_implementation(kernel.spec).to_dict())
    else:
        data["error"] = kernel.error
    return data

