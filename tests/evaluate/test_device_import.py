"""A library that needs a GPU to import (tests/data/library_needs_gpu queries its device's properties when imported,
as some Triton libraries do): on a CPU machine, `list --import` and `check` say so in one line naming the library and
what to do, instead of a traceback or "cannot import"; a library failing for another reason is not called one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from kforge_bot.cli import cli
from kforge_bot.evaluate.worker.device_import import asks_for_device, has_accelerator

LIBRARY = Path(__file__).parents[1] / "data" / "library_needs_gpu"
NEEDS = "gpulib needs a GPU to import: on this machine without one it raised AssertionError: Torch not compiled " \
        "with CUDA enabled (run it on a GPU runner"

cpu_only = pytest.mark.skipif(has_accelerator(), reason="the fixture imports where a GPU is present")


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    shutil.copytree(LIBRARY, tmp_path / "lib")
    return tmp_path / "lib"


@pytest.mark.slow
@cpu_only
def test_list_import_says_the_library_needs_a_gpu(lib: Path) -> None:
    result = CliRunner().invoke(cli, ["list", str(lib), "--import"])
    assert result.exit_code == 1, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("scaled_relu")]
    assert len(rows) == 2 and all(NEEDS in row for row in rows), result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
@cpu_only
def test_check_says_the_library_needs_a_gpu_on_the_kernel_side_and_the_reference_side(lib: Path) -> None:
    """The kernel against a torch reference (the kernel's import fails in the candidate's worker), and the kernel
    as its own reference (the reference's worker fails first): either way, one line."""
    result = CliRunner().invoke(cli, ["check", str(lib / "kforge.yaml"), "--kernel", "scaled_relu"])
    assert f"reason: {NEEDS}" in result.output, result.output
    proc = subprocess.run([sys.executable, "-m", "kforge_bot", "check", str(lib / "kforge.yaml"), "--kernel",
                           "scaled_relu_self"], check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and NEEDS in proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()[-1]) > len(NEEDS)


@pytest.mark.slow
def test_a_library_missing_a_dependency_is_not_said_to_need_a_gpu(lib: Path) -> None:
    (lib / "src/gpulib/runtime.py").write_text("import no_such_dependency_kforge\n\nSM_COUNT = 1\n")
    result = CliRunner().invoke(cli, ["list", str(lib), "--import"])
    assert result.exit_code == 1 and "No module named 'no_such_dependency_kforge'" in result.output, result.output
    assert "needs a GPU" not in result.output


def test_device_queries_are_told_from_other_failures() -> None:
    def raised(fn) -> BaseException:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the exception is the test's subject
            return exc
        raise AssertionError("did not raise")

    if not torch.cuda.is_available():
        assert asks_for_device(raised(lambda: torch.cuda.get_device_properties(0)))  # through torch/cuda
    wrapped = raised(lambda: _reraise(RuntimeError("0 active drivers ([]). There should only be one.")))
    assert asks_for_device(wrapped)  # Triton's, re-raised by the library as its own
    assert not asks_for_device(raised(lambda: _reraise(ValueError("block size must be a power of 2"))))


def _reraise(cause: Exception) -> None:
    try:
        raise cause
    except Exception as exc:
        raise ImportError("the library could not start") from exc
