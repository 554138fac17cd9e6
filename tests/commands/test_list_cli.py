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
                         "rmsnorm_cuda", "rmsnorm_triton", "softmax_triton", "swiglu_triton"}
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


def test_list_import_imports_each_kernel_in_a_worker_and_plain_list_says_it_did_not(tmp_path: Path) -> None:
    """`list` reported every kernel as loading, then `check` failed with ModuleNotFoundError in the worker. Plain
    `list` now says it imported nothing; `--import` imports each kernel where check runs it (sandboxed)."""
    repo = tmp_path / "lib"
    shutil.copytree(Path(__file__).parents[1] / "data" / "library_repo", repo)
    manifest = repo / "kforge.yaml"
    # swiglu's launcher imports the package by name: without its import root it does not import in a worker.
    text = manifest.read_text()
    head, _, tail = text.partition("  swiglu:")
    manifest.write_text(head + "  swiglu:" + tail.replace("    import_roots: [src]\n", "", 1))
    plain = CliRunner().invoke(cli, ["list", str(repo)])
    assert plain.exit_code == 0, plain.output
    assert "nothing imported; `kforge-bot list --import` imports each kernel in a worker" in plain.output
    tried = CliRunner().invoke(cli, ["list", str(repo), "--import", "--json", str(tmp_path / "list.json")])
    assert tried.exit_code == 1, tried.output
    rows = {r["id"]: r for r in json.loads((tmp_path / "list.json").read_text())["kernels"]}
    assert {k: rows[k]["imports"] for k in ("rms_norm", "rope", "rms_norm_autograd")} == dict.fromkeys(
        ("rms_norm", "rope", "rms_norm_autograd"), "ok")
    assert "No module named 'minilib'" in rows["swiglu"]["imports"]
    assert any(line.startswith("swiglu  [manifest]") and "DOES NOT LOAD: does not import in its worker" in line
               for line in tried.output.splitlines())


def test_lists_gpumode_problem_folders() -> None:
    result = CliRunner().invoke(cli, ["list", str(Path(__file__).parents[1] / "data" / "gpumode"), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.output)["kernels"]}
    assert rows["scaled_add_py"]["format"] == "gpumode" and rows["scaled_add_py"]["shape_sets"] == 3
    assert rows["scaled_add_py"]["file"] == "scaled_add_py/submission.py"
    assert rows["lax_check_py"]["error"] is None
