"""`kforge-bot list`: the managed kernels of a repository, as the gate and the PR bot discover them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from kforge_bot.cli import cli

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_lists_the_bundled_examples_with_format_language_and_targets() -> None:
    result = CliRunner().invoke(cli, ["list", str(EXAMPLES), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.output)["kernels"]}
    assert set(rows) == {"kernelbench/softmax_problem.py", "matmul_bias_relu_cpu", "matmul_bias_relu_triton",
                         "rmsnorm_cuda", "rmsnorm_triton", "softmax_triton"}
    assert rows["matmul_bias_relu_cpu"]["targets"] == ["cpu"] and rows["matmul_bias_relu_cpu"]["shape_sets"] == 2
    assert rows["kernelbench/softmax_problem.py"]["format"] == "kernelbench"
    assert all(r["error"] is None for r in rows.values())


def test_a_kernel_that_does_not_load_is_listed_with_its_error_and_exit_1(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "kernelbench" / "softmax_problem.py", tmp_path / "good.py")
    (tmp_path / "kforge.yaml").write_text("version: 1\nkernels:\n  broken:\n    file: missing.py\n    entry: f\n"
                                          "    inputs: missing.py:make\n    shapes: [{n: 4}]\n")
    result = CliRunner().invoke(cli, ["list", str(tmp_path)])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("good.py  [kernelbench]") for line in lines)
    assert any(line.startswith("broken  [manifest]") and "DOES NOT LOAD" in line for line in lines), result.output


def test_lists_gpumode_problem_folders() -> None:
    result = CliRunner().invoke(cli, ["list", str(Path(__file__).parents[1] / "data" / "gpumode"), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.output)["kernels"]}
    assert rows["scaled_add_py"]["format"] == "gpumode" and rows["scaled_add_py"]["shape_sets"] == 3
    assert rows["scaled_add_py"]["file"] == "scaled_add_py/submission.py"
    assert rows["lax_check_py"]["error"] is None
