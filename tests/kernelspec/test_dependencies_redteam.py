"""Red team: files a kernel loads by a path made at run time through a loader the dependency scan does not know
(kforge_bot/kernelspec/dependencies.py). Such a file is not in the kernel's closure, so a pull request that changes only
it leaves the kernel "unchanged": the gate does not measure it and the result cache key stays the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.gitrepos import write

from kforge_bot.kernelspec.dependencies import local_closure

LOADERS = {
    # a committed shared library the kernel calls (the compiled kernel itself)
    "ctypes.CDLL": ("libk.so", 'import ctypes, os\n\nLIB = ctypes.CDLL(os.path.dirname(__file__) + "/libk" + ".so")\n'),
    "torch.ops.load_library": ("libk.so", 'import os, torch\n\n'
                                          'torch.ops.load_library(os.path.dirname(__file__) + "/libk" + ".so")\n'),
    # a Python module loaded from a file, not imported by name
    "SourceFileLoader": ("impl.py", 'import os\nfrom importlib.machinery import SourceFileLoader\n\n'
                                    'impl = SourceFileLoader("impl", os.path.join(os.path.dirname(__file__), '
                                    '"impl" + ".py")).load_module()\n'),
}


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_a_file_loaded_by_a_computed_path_through_any_loader_counts(tmp_path: Path, loader: str) -> None:
    loaded, source = LOADERS[loader]
    write(tmp_path, "k/kernel.py", source)
    write(tmp_path, f"k/{loaded}", "the kernel's real code")
    closure = local_closure([tmp_path / "k/kernel.py"], [tmp_path / "k"], tmp_path)
    assert (tmp_path / "k" / loaded).resolve() in closure, closure
