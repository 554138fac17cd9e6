"""Code a library runs at import that asks for a GPU, read and never run (init.scan.device_queries): `init` warns of a
library that will not import on a CPU machine."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kforge_bot.cli import cli
from kforge_bot.init.scan.device_queries import import_time_queries
from kforge_bot.init.scan.modules import Library

KERNEL = ("import triton\n\n\n@triton.jit\ndef _scale(x):\n    pass\n\n\n"
          "def scale(x):\n    _scale[(1,)](x)\n    return x\n")


def _library(tmp_path: Path, runtime: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "gpulib" / "ops").mkdir(parents=True)
    (repo / "gpulib" / "__init__.py").write_text("from gpulib import runtime\n")
    (repo / "gpulib" / "runtime.py").write_text(runtime)
    (repo / "gpulib" / "ops" / "__init__.py").write_text("")
    (repo / "gpulib" / "ops" / "scale.py").write_text(KERNEL)
    return repo


def test_import_time_device_queries_are_found_and_calls_inside_functions_are_not(tmp_path: Path) -> None:
    """Module level, class bodies and decorators run at import; a function's body (and a lambda's) only when
    called, so it counts where import-time code calls it."""
    repo = _library(tmp_path, "import torch\nimport triton\nfrom triton.runtime import driver\n\n"
                              "SM = torch.cuda.get_device_properties(0).multi_processor_count\n"
                              "TARGET = triton.runtime.driver.active.get_current_target()\n"
                              "ARCH = driver.active.get_current_target().arch\n"
                              "HAS = torch.cuda.is_available()\n\n\n"
                              "def later():\n    return torch.cuda.current_device()\n\n\n"
                              "class Settings:\n    NAME = torch.cuda.get_device_name()\n\n\n"
                              "def stages():\n    return 2 if torch.cuda.get_device_capability()[0] < 8 else 3\n\n\n"
                              "def config():\n    return {'num_stages': stages()}\n\n\n"
                              "@triton.heuristics({'tf32': lambda _: later()})\n"
                              "@triton.autotune(configs=[config()], key=[])\ndef kernel():\n    pass\n")
    files = sorted(repo.rglob("*.py"))
    found = [(q.rel, q.line, q.call) for q in import_time_queries(Library.read(repo, files))]
    assert found == [("gpulib/runtime.py", 5, "torch.cuda.get_device_properties"),
                     ("gpulib/runtime.py", 6, "triton.runtime.driver.active"),
                     ("gpulib/runtime.py", 7, "driver.active"),
                     ("gpulib/runtime.py", 16, "torch.cuda.get_device_name"),
                     # attorch's autotune configs: a function called at import that asks through another one
                     ("gpulib/runtime.py", 28, "config() -> torch.cuda.get_device_capability")]


def test_init_says_in_one_line_that_the_library_needs_a_gpu_to_import(tmp_path: Path) -> None:
    repo = _library(tmp_path, "import torch\n\nSM = torch.cuda.get_device_properties(0).multi_processor_count\n")
    result = CliRunner().invoke(cli, ["init", str(repo)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "needs a GPU" in line]
    assert lines == [("# needs a GPU to import: gpulib/runtime.py:3 (torch.cuda.get_device_properties) asks for the "
                      "device when imported; run `kforge-bot list --import` and `check` on a GPU runner")]
    quiet = _library(tmp_path / "other", "import torch\n\nHAS = torch.cuda.is_available()\n")
    assert "needs a GPU" not in CliRunner().invoke(cli, ["init", str(quiet)]).output
    # Another vendor's backend folder asks for its own device, which no kforge target imports.
    (quiet / "gpulib" / "backends" / "_ascend").mkdir(parents=True)
    (quiet / "gpulib" / "backends" / "_ascend" / "__init__.py").write_text(
        "import triton\n\nTARGET = triton.runtime.driver.active.get_current_target()\n")
    assert "needs a GPU" not in CliRunner().invoke(cli, ["init", str(quiet)]).output
