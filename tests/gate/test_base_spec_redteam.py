"""Red team: what of its test a change edits (kforge_bot/gate/base_spec.py::spec_changes) where the reference and the
inputs share the kernel's file. The list is what a maintainer reads before adding the spec-change label, and the
label lets the head's whole test count."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.gate_repos import PLAIN, REF, manifest
from fakes.gitrepos import write

from kforge_bot.gate.base_spec import spec_changes
from kforge_bot.kernelspec import load_manifest

OWN = PLAIN + "\n\n" + REF.replace("import torch\n\n\n", "")
FILES = {"k.py": OWN, "kforge.yaml": manifest(["k"]).replace("ref.py", "k.py")}


def _specs(tmp: Path, head_kernel_file: str):
    for side, files in (("base", FILES), ("head", {**FILES, "k.py": head_kernel_file})):
        for rel, text in files.items():
            write(tmp / side, rel, text)
    return load_manifest(tmp / "base" / "kforge.yaml")["k"], load_manifest(tmp / "head" / "kforge.yaml")["k"]


@pytest.mark.parametrize("redefined", [
    "def reference(x, y):\n    return x\n",
    "reference = lambda x, y: x\n",
    "def make_inputs(n):\n    return torch.zeros(n, n), torch.zeros(n, n)\n",
])
def test_a_reference_or_inputs_defined_again_further_down_is_a_change(tmp_path: Path, redefined: str) -> None:
    base, head = _specs(tmp_path, OWN + "\n\n" + redefined)
    assert spec_changes(base, head) != []
