"""`kforge-bot list`: the managed kernels of a repository, as the gate and the PR bot discover them."""

from __future__ import annotations

import pytest

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


@pytest.mark.slow
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


def test_a_repository_over_the_kernel_cap_fails_list_and_check_all_with_one_line(tmp_path: Path) -> None:
    """`list` said "no managed kernels" and exited 0 for a manifest of 263 kernels; `check --all` said there were
    none. Both now fail with the cap's line (exit 2)."""
    from fakes.gate_repos import PLAIN, REF, manifest
    from fakes.gate_repos import cli as real_cli

    (tmp_path / "ref.py").write_text(REF)
    (tmp_path / "k0.py").write_text(PLAIN)
    (tmp_path / "kforge.yaml").write_text(manifest([f"k{i}" for i in range(263)]))
    for args in (["list", str(tmp_path)], ["check", "--all", str(tmp_path)]):
        result = real_cli(*args, cwd=tmp_path)
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.strip().endswith("263 kernels, over the cap of 256 in one manifest (split them over "
                                              "manifests in subfolders)") and len(result.stderr.splitlines()) == 1
        assert "no managed kernels" not in result.stdout + result.stderr


@pytest.mark.slow
def test_list_import_imports_a_library_once_per_worker(tmp_path: Path, monkeypatch) -> None:
    """`list --import` took about 10 s an entry (a worker each, the library imported each time: 7 min for
    Liger-Kernel's 42). Its kernels now share one worker per target, which imports the package once: this one
    refuses a second import in the same process, and every entry still imports."""
    from kforge_bot.evaluate import api

    repo = tmp_path / "lib"
    (repo / "src" / "oncelib" / "ops").mkdir(parents=True)
    (repo / "src" / "oncelib" / "__init__.py").write_text(
        "import builtins\n\nif getattr(builtins, '_oncelib_imported', False):\n"
        "    raise ImportError('oncelib imported twice in one process')\nbuiltins._oncelib_imported = True\n"
        "from oncelib.ops import a, b, c  # noqa: F401\n")
    (repo / "src" / "oncelib" / "ops" / "__init__.py").write_text("")
    entries = []
    for name in ("a", "b", "c"):
        (repo / "src" / "oncelib" / "ops" / f"{name}.py").write_text(f"def {name}(x):\n    return x + 1\n")
        entries.append(f"  {name}:\n    file: src/oncelib/ops/{name}.py\n    entry: oncelib.ops.{name}:{name}\n"
                       f"    import_roots: [src]\n    inputs: inputs.py:make\n    shapes: [{{n: 4}}]\n"
                       f"    targets: [cpu]\n")
    (repo / "inputs.py").write_text("import torch\n\n\ndef make(n):\n    return (torch.randn(n),)\n")
    (repo / "kforge.yaml").write_text("version: 1\nkernels:\n" + "".join(entries))
    workers = []
    real = api.run_worker
    monkeypatch.setattr(api, "run_worker", lambda *a, **k: workers.append(1) or real(*a, **k))
    result = CliRunner().invoke(cli, ["list", str(repo), "--import", "--json", str(tmp_path / "list.json")])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "list.json").read_text())["kernels"]
    assert [r["imports"] for r in rows] == ["ok", "ok", "ok"]
    assert len(workers) == 1
