"""`kforge-bot init`: a proposed kforge.yaml from a repository's own files, read and never imported."""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml
from click.testing import CliRunner

from kforge_bot.cli import cli
from kforge_bot.spec import load_manifest

DATA = Path(__file__).parents[1] / "data"

TRITON = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    raise SystemExit("init must read this file, never import it")


    @triton.jit
    def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pass


    def scale(x):
        return x


    def make_inputs(n, device=None):
        return (torch.randn(n),)
''')
CUDA = textwrap.dedent('''
    from torch.utils.cpp_extension import load_inline

    SRC = "__global__ void k(float* x) {}"


    def add_one(x):
        return x
''')


def test_init_proposes_entries_with_todos_and_names_what_it_found(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "kernels").mkdir(parents=True)
    (repo / "kernels" / "scale.py").write_text(TRITON)
    (repo / "kernels" / "add_one.py").write_text(CUDA)
    (repo / "kernels" / "plain.py").write_text("def f():\n    return 1\n")
    (repo / "problems").mkdir()
    (repo / "problems" / "softmax.py").write_text((DATA / "kb" / "softmax.py").read_text())
    (repo / ".venv" / "lib").mkdir(parents=True)
    (repo / ".venv" / "lib" / "vendored.py").write_text(TRITON)

    result = CliRunner().invoke(cli, ["init", str(repo)])
    assert result.exit_code == 0, result.output
    proposal = yaml.safe_load(result.output)
    kernels = proposal["kernels"]
    assert set(kernels) == {"scale", "add_one"}  # not the plain file, the KernelBench problem or the venv
    scale = kernels["scale"]
    assert (scale["file"], scale["entry"], scale["language"], scale["targets"]) == \
        ("kernels/scale.py", "scale", "triton", ["cuda", "xpu"])
    assert scale["inputs"] == "kernels/scale.py:make_inputs"
    assert kernels["add_one"]["language"] == "cuda"
    assert "TODO: write reference(...), the same call in plain PyTorch" in result.output
    assert "TODO: make_inputs needs n: one mapping per size, e.g. {n: ...}" in result.output
    assert "# problems/softmax.py: a KernelBench problem (Model, get_inputs): found without an entry" in result.output

    written = CliRunner().invoke(cli, ["init", str(repo), "--write"])
    assert written.exit_code == 0 and "fill in the TODOs" in written.output
    manifest = repo / "kforge.yaml"
    assert yaml.safe_load(manifest.read_text()) == proposal
    again = CliRunner().invoke(cli, ["init", str(repo), "--write"])
    assert again.exit_code != 0 and manifest.read_text().startswith("# kforge.yaml proposed")
    # What is still to do, the manifest loader names in one line.
    try:
        load_manifest(manifest)
    except Exception as exc:  # noqa: BLE001
        assert "defines no top-level 'reference'" in str(exc)
    else:
        raise AssertionError("a proposal with TODOs left must not load silently")
    # A second run proposes nothing new: the files are already in the manifest.
    rerun = CliRunner().invoke(cli, ["init", str(repo)])
    assert "# kernels/scale.py: already in kforge.yaml" in rerun.output and "kernels:" not in rerun.output
