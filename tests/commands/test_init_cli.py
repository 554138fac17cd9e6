"""`kforge-bot init`: a proposed kforge.yaml from a repository's own files, read and never imported."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

from kforge_bot.cli import cli
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import load_manifest, load_manifest_entry

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
        _scale_kernel[(1,)](x, x, x.numel(), BLOCK=128)
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
    assert set(kernels) == {"kernels.scale", "kernels.add_one"}  # not the plain file, KernelBench or the venv
    scale = kernels["kernels.scale"]
    assert (scale["file"], scale["entry"], scale["language"], scale["targets"]) == \
        ("kernels/scale.py", "scale", "triton", ["cuda"])  # no xpu: the library has no Intel backend
    assert scale["inputs"] == "kernels/scale.py:make_inputs"
    assert kernels["kernels.add_one"]["language"] == "cuda"
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
    assert "# kernels/scale.py:scale: already in kforge.yaml" in rerun.output and "kernels:" not in rerun.output


def _copy_library(tmp_path: Path) -> Path:
    import shutil

    repo = tmp_path / "library"
    shutil.copytree(DATA / "kernel_library", repo, ignore=shutil.ignore_patterns("conftest.py", "__pycache__"))
    return repo


def test_init_on_a_kernel_library_finds_its_launchers_and_the_references_its_tests_use(tmp_path: Path) -> None:
    """tests/data/kernel_library: a vendor folder, `triton.jit(f)`, an autotuned kernel, a launcher in another module
    than its kernels, helpers beside them, and tests that compare each launcher with PyTorch."""
    repo = _copy_library(tmp_path)
    result = CliRunner().invoke(cli, ["init", str(repo)])
    assert result.exit_code == 0, result.output
    kernels = yaml.safe_load(result.output)["kernels"]
    # Names say where the kernel lives; Ascend's copy is left out, Intel's goes to its own target.
    assert set(kernels) == {"ops.rms_norm", "ops.fused", "ops.scale", "ops.softmax", "ops.backends.xpu.softmax"}
    assert not any(re.search(r"_\d+$", name) for name in kernels)
    assert kernels["ops.backends.xpu.softmax"]["targets"] == ["xpu"]
    assert all(k["targets"] == ["cuda", "xpu"] for n, k in kernels.items() if "xpu" not in n)
    assert "skipped 1 launcher(s) in ascend's backend folders" in result.output
    assert "_ascend" not in "".join(k["file"] for k in kernels.values())
    # The public launcher, across modules and through private helpers; never a helper, never the backward.
    assert {n: (k["file"], k["entry"]) for n, k in kernels.items()} == {
        "ops.rms_norm": ("mylib/ops/rms_norm.py", "rms_norm_forward"),
        "ops.fused": ("mylib/kernels/fused_kernels.py", "mylib/ops/fused.py:fused_add_mul"),  # file: its kernels
        "ops.scale": ("mylib/ops/scale.py", "scale"),
        "ops.softmax": ("mylib/ops/softmax.py", "softmax"),
        "ops.backends.xpu.softmax": ("mylib/ops/backends/xpu/softmax.py", "softmax"),
    }
    assert "backward: {inputs: [x], launcher: rms_norm_backward, args: [grad.0, input.x, input.w, output.1]}" in \
        result.output
    assert "outputs: 0  # it returns several values; tests/test_ops.py::test_rms_norm compares this one" in \
        result.output
    assert "once the manifest has" not in result.output  # no stale comment about keys the manifest has
    assert "autotuned: _softmax_kernel" in result.output
    # References and sizes from the tests, marked for review.
    assert kernels["ops.fused"]["reference"] == "tests/test_ops.py:torch_fused"
    assert kernels["ops.rms_norm"]["reference"] == "kforge_references.py:ops_rms_norm_reference"
    for name in ("ops.rms_norm", "ops.fused", "ops.scale", "ops.softmax"):
        test = "test_fused_add_mul" if name == "ops.fused" else f"test_{name.split('.')[-1]}"
        assert f"reference: {kernels[name]['reference']}  # from tests/test_ops.py::{test}; review" in result.output
    assert kernels["ops.rms_norm"]["shapes"] == [{"rows": 2, "cols": 64, "dtype": "float32"},
                                                 {"rows": 2, "cols": 64, "dtype": "bfloat16"},
                                                 {"rows": 8, "cols": 4096, "dtype": "float32"},
                                                 {"rows": 8, "cols": 4096, "dtype": "bfloat16"}]
    assert kernels["ops.fused"]["shapes"] == [{"n": 1000}, {"n": 1 << 20}]
    assert kernels["ops.softmax"]["shapes"] == [{"rows": 4, "cols": 128}, {"rows": 16, "cols": 1000}]
    assert "from tests/test_ops.py::test_rms_norm (pytest.mark.parametrize); review" in result.output

    written = CliRunner().invoke(cli, ["init", str(repo), "--write"])
    assert written.exit_code == 0, written.output
    manifest = repo / "kforge.yaml"
    # kforge's own loader: every entry the tests completed loads; the one they did not names its TODO.
    raw = yaml.safe_load(manifest.read_text())["kernels"]
    for name, entry in raw.items():
        if name == "ops.backends.xpu.softmax":
            with pytest.raises(KforgeError, match="defines no top-level 'reference'"):
                load_manifest_entry(manifest, name, entry)
        else:
            spec = load_manifest_entry(manifest, name, entry)
            assert spec.language == "triton" and spec.reference != spec.baseline
    # The generated references and inputs run (torch only), at the tests' sizes.
    module = _import(repo / "kforge_references.py")
    for shape in raw["ops.rms_norm"]["shapes"]:
        x, w, eps = module.ops_rms_norm_inputs(**shape)
        assert x.shape == (shape["rows"], shape["cols"]) and str(x.dtype) == f"torch.{shape['dtype']}"
        expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
        torch.testing.assert_close(module.ops_rms_norm_reference(x, w, eps), expected)
    x, alpha = module.ops_scale_inputs(n=17)
    torch.testing.assert_close(module.ops_scale_reference(x, alpha), x * 3.0)
    # Written once: a second --write finds every launcher managed, refuses, and loses nothing.
    before = manifest.read_text()
    again = CliRunner().invoke(cli, ["init", str(repo), "--write"])
    assert again.exit_code != 0 and "no new kernel files" in str(again.exception) and manifest.read_text() == before


def _import(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"kforge_init_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------ init --draft

OPTIONAL_TRITON = textwrap.dedent('''
    """alpha * x: a Triton kernel where triton is installed, the same arithmetic in torch elsewhere."""
    import torch

    try:
        import triton
        import triton.language as tl
    except ImportError:  # no triton here: the launcher's torch path runs
        triton = None


    def _scale_impl(x_ptr, out_ptr, alpha, n, BLOCK: "tl.constexpr"):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * alpha, mask=offsets < n)


    if triton is not None:
        _scale_kernel = triton.jit(_scale_impl)


    def scale(x, alpha):
        if triton is None or not x.is_cuda:
            return x * alpha
        out = torch.empty_like(x)
        _scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, alpha, x.numel(), BLOCK=1024)
        return out
''')


def _draft(body: str) -> str:
    return f"Here is the module.\n\n```python\n{textwrap.dedent(body).strip()}\n```\n"


WRONG_DRAFT = _draft('''
    import os
    import torch

    os.environ["KFORGE_DRAFT_RAN_IN"] = str(os.getpid())  # the bot must never run a reply in its own process

    SHAPES = [{"n": 1000}, {"n": 4096, "dtype": "float64"}]


    def reference(x, alpha):
        return x * alpha + 1.0


    def make_inputs(n, dtype="float32"):
        return (torch.randn(n, dtype=getattr(torch, dtype)), 2.5)
''')
RIGHT_DRAFT = WRONG_DRAFT.replace("x * alpha + 1.0", "x * alpha")


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch):
    from fakes.llm_server import ScriptedLLMServer

    with ScriptedLLMServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("KFORGE_MODEL", "kforge-test-model")
        yield server


@pytest.mark.slow
def test_init_draft_proposes_only_what_ran_correctly_against_the_kernel(tmp_path: Path, llm_env) -> None:
    from fakes.llm_server import reply

    repo = tmp_path / "repo"
    (repo / "kernels").mkdir(parents=True)
    (repo / "kernels" / "scale.py").write_text(OPTIONAL_TRITON)
    llm_env.push(reply(WRONG_DRAFT), reply(RIGHT_DRAFT))
    result = CliRunner().invoke(cli, ["init", str(repo), "--draft", "--target", "cpu", "--write"])
    assert result.exit_code == 0, result.output
    assert "KFORGE_DRAFT_RAN_IN" not in os.environ  # parsed here, run only in a worker
    prompts = llm_env.prompts()
    assert len(prompts) == 2 and "def scale(x, alpha):" in prompts[0] and "def _scale_impl(" in prompts[0]
    # The wrong draft went back with its verdict; the second one was proposed, and says what was run.
    assert "Run against the kernel: incorrect" in prompts[1]
    manifest = (repo / "kforge.yaml").read_text()
    entry = yaml.safe_load(manifest)["kernels"]["kernels.scale"]
    assert entry["reference"] == "kforge_drafts/kernels_scale.py:reference"
    assert entry["inputs"] == "kforge_drafts/kernels_scale.py:make_inputs"
    assert entry["shapes"] == [{"n": 1000}, {"n": 4096, "dtype": "float64"}]
    assert "drafted by kforge-test-model; run against the kernel on cpu" in manifest and "review" in manifest
    assert "x * alpha\n" in (repo / "kforge_drafts" / "kernels_scale.py").read_text()
    spec = load_manifest(repo / "kforge.yaml")["kernels.scale"]
    assert spec.inputs_symbol == "make_inputs" and spec.reference.symbol == "reference"


@pytest.mark.slow
def test_init_draft_leaves_a_draft_that_never_matched_as_a_todo(tmp_path: Path, llm_env) -> None:
    from fakes.llm_server import reply

    repo = tmp_path / "repo"
    (repo / "kernels").mkdir(parents=True)
    (repo / "kernels" / "scale.py").write_text(OPTIONAL_TRITON)
    cheat = RIGHT_DRAFT.replace("import torch\n", "import torch\nfrom kernels.scale import scale\n", 1)
    llm_env.push(reply(cheat), reply(WRONG_DRAFT))
    result = CliRunner().invoke(cli, ["init", str(repo), "--draft", "--target", "cpu"])
    assert result.exit_code == 0, result.output
    assert "# draft: not proposed: the draft was run against the kernel on cpu: incorrect" in result.output
    assert "imports the library itself (kernels.scale)" in llm_env.prompts()[1]  # refused unrun, sent back
    assert "TODO: write reference(...)" in result.output and "kforge_drafts" not in result.output
    assert "KFORGE_DRAFT_RAN_IN" not in os.environ


def test_init_draft_without_an_endpoint_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(cli, ["init", str(tmp_path), "--draft"])
    assert result.exit_code != 0 and "--draft needs an LLM endpoint" in str(result.exception)


def test_init_names_the_import_root_of_a_src_layout(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src" / "pkg" / "ops").mkdir(parents=True)
    (repo / "src" / "pkg" / "__init__.py").write_text("")
    (repo / "src" / "pkg" / "ops" / "__init__.py").write_text("")
    (repo / "src" / "pkg" / "ops" / "add.py").write_text(
        "import triton\n\n\n@triton.jit\ndef _add(x, y):\n    pass\n\n\ndef add(x, y):\n    _add[(1,)](x, y)\n    return x\n")
    result = CliRunner().invoke(cli, ["init", str(repo)])
    assert result.exit_code == 0, result.output
    assert list(yaml.safe_load(result.output)["kernels"]) == ["ops.add"]
    assert "    import_roots: [src]  # src/pkg/ops/add.py imports as `pkg.ops.add`" in result.output


def test_init_on_a_src_layout_proposes_what_loads_as_written(tmp_path: Path) -> None:
    """The stumbles of issue 45 on tests/data/kernel_library_src: `import_roots:` only in a stale comment, `outputs:`,
    `inplace:` and `backward:` never proposed, an internal helper named instead of the exported launcher, an ARM CPU
    backend marked cuda, `xpu` claimed without an xpu backend, a reference taken from a test that needs
    transformers, and toy sizes chosen over the tests' largest."""
    import shutil

    repo = tmp_path / "lib"
    shutil.copytree(DATA / "kernel_library_src", repo)
    result = CliRunner().invoke(cli, ["init", str(repo)])
    assert result.exit_code == 0, result.output
    kernels = yaml.safe_load(result.output)["kernels"]
    assert set(kernels) == {"ops.act", "ops.mm", "ops.rms_norm", "ops.rms_norm.autograd", "ops.rope"}
    assert kernels["ops.mm"]["entry"] == "mm"  # what the package exports, not general_mm
    assert all(k["import_roots"] == ["src"] and k["targets"] == ["cuda"] for k in kernels.values())
    assert "skipped 1 launcher(s) in arm's backend folders" in result.output
    assert "blit" not in result.output and "apps/" not in result.output
    assert (kernels["ops.rope"]["outputs"], kernels["ops.rope"]["inplace"]) == ([], ["q", "k"])
    assert kernels["ops.rms_norm"]["outputs"] == 0
    assert kernels["ops.rms_norm"]["backward"] == {"inputs": ["x"], "launcher": "rms_norm_backward",
                                                   "args": ["grad.0", "input.x", "input.w", "output.1"]}
    assert kernels["ops.rms_norm.autograd"]["entry"] == "RMSNormFunction"
    assert kernels["ops.rms_norm.autograd"]["backward"] == {"inputs": ["x", "w"]}
    # An autograd.Function that launches the kernels itself is the entry; its tensor inputs get gradients.
    assert (kernels["ops.act"]["entry"], kernels["ops.act"]["backward"]) == ("ActFunction", {"inputs": ["input"]})
    assert "its reference needs 'transformers', which the library alone does not provide" in result.output
    assert kernels["ops.rope"]["reference"] == "src/srclib/ops/rope.py:reference"  # a TODO, not the test's
    assert kernels["ops.mm"]["shapes"] == [{"m": 4096, "n": 4096}, {"m": 2048, "n": 8192}, {"m": 64, "n": 64},
                                           {"m": 1024, "n": 1024}]
    assert "once the manifest has" not in result.output
    # Written, the entries the tests completed load through kforge's own loader as proposed.
    assert CliRunner().invoke(cli, ["init", str(repo), "--write"]).exit_code == 0
    raw = yaml.safe_load((repo / "kforge.yaml").read_text())["kernels"]
    spec = load_manifest_entry(repo / "kforge.yaml", "ops.mm", raw["ops.mm"])
    assert spec.import_roots == ("src",) and spec.kernel_file == "src/srclib/ops/mm.py"


def test_init_path_scans_one_folder_and_never_enters_an_application(tmp_path: Path) -> None:
    """Library C: init parsed 47 MB of an unrelated app folder. Folders that hold no library are never entered, and
    `init REPO PATH` reads only PATH (and the tests)."""
    import shutil

    repo = tmp_path / "lib"
    shutil.copytree(DATA / "kernel_library_src", repo)
    (repo / "apps" / "viewer" / "broken.py").write_text("def (:\n")  # parsed, it would only be skipped: never read
    (repo / "apps" / "viewer" / "big.py").write_text("x = 1\n" * 400_000)
    from kforge_bot.init.files import library_files as _library_files, python_files as _python_files

    read = {p.relative_to(repo).as_posix() for p in _python_files(repo)}
    assert not any(r.startswith("apps/") for r in read) and "src/srclib/ops/mm.py" in read
    # An application in a folder of any name, which mentions no kernel, is read as text and never parsed.
    parsed = {p.relative_to(repo).as_posix() for p in _library_files(repo)}
    assert "server/api/routes.py" in read and not any(r.startswith("server/") for r in parsed)
    assert "src/srclib/ops/mm.py" in parsed and "tests/test_mm.py" in parsed
    only = {p.relative_to(repo).as_posix() for p in _python_files(repo, ("src/srclib/ops",))}
    assert only == {"src/srclib/__init__.py", "src/srclib/ops/__init__.py", "src/srclib/ops/act.py",
                    "src/srclib/ops/mm.py",
                    "src/srclib/ops/rms_norm.py",
                    "src/srclib/ops/rope.py", "tests/test_mm.py", "tests/test_rope.py"}
    result = CliRunner().invoke(cli, ["init", str(repo), "src/srclib/ops"])
    assert result.exit_code == 0, result.output
    assert set(yaml.safe_load(result.output)["kernels"]) == {"ops.act", "ops.mm", "ops.rms_norm",
                                                               "ops.rms_norm.autograd", "ops.rope"}
    assert "arm's backend" not in result.output  # outside the folder scanned
    outside = CliRunner().invoke(cli, ["init", str(repo), str(tmp_path)])
    assert isinstance(outside.exception, KforgeError) and "not a folder inside the repository" in str(outside.exception)


@pytest.mark.slow
def test_init_over_the_kernel_cap_refuses_with_one_line_naming_it(tmp_path: Path) -> None:
    """Library B's 263 proposed entries made a manifest that `list` read as empty. init now refuses, naming the
    cap and the way to propose a part."""
    repo = tmp_path / "big"
    (repo / "ops").mkdir(parents=True)
    launchers = "".join(f"\n\ndef op{i}(x):\n    _k[(1,)](x)\n    return x\n" for i in range(257))
    (repo / "ops" / "many.py").write_text("import triton\n\n\n@triton.jit\ndef _k(x):\n    pass\n" + launchers)
    for args in (["init", str(repo)], ["init", str(repo), "--write"]):
        result = CliRunner().invoke(cli, args)
        assert isinstance(result.exception, KforgeError), result.output  # the CLI's one line, exit 2
        assert "257 entries found, over the cap of 256 kernels in one manifest" in str(result.exception)
        assert "`kforge-bot init REPO FOLDER` scans only FOLDER" in str(result.exception)
    assert not (repo / "kforge.yaml").exists()


def test_init_names_fit_the_kernel_name_rule_and_a_broken_manifest_fails_list(tmp_path: Path) -> None:
    """Liger-Kernel's proposal named `ops.fused_neighborhood_attention.fused_neighborhood_attention_...` (over 64
    characters): the whole manifest did not load, and `list` said it had no kernels. Names now fit, and a manifest
    that does not load fails `list` and `check --all` with its line."""
    repo = tmp_path / "repo"
    long = "fused_neighborhood_attention_with_a_long_module_name"
    (repo / "ops").mkdir(parents=True)
    launchers = "".join(f"\n\ndef {long}_{i}(x):\n    _k[(1,)](x)\n    return x\n" for i in range(2))
    (repo / "ops" / f"{long}.py").write_text("import triton\n\n\n@triton.jit\ndef _k(x):\n    pass\n" + launchers)
    result = CliRunner().invoke(cli, ["init", str(repo)])
    assert result.exit_code == 0, result.output
    names = list(yaml.safe_load(result.output)["kernels"])
    assert len(names) == 2 and all(len(n) <= 64 for n in names), names
    (repo / "kforge.yaml").write_text(yaml.safe_dump({"version": 1, "kernels": {"x" * 65: {"file": "a.py"}}}))
    for args in (["list", str(repo)], ["check", "--all", str(repo)]):
        failed = CliRunner().invoke(cli, args)
        assert isinstance(failed.exception, KforgeError) and "kernel name" in str(failed.exception), failed.output
