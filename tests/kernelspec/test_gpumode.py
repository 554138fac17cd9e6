"""GPU MODE problems read as they are: task.yml's keyword sets, seeds dropped, the benchmarks timed, their modules
found where `files:` says, and one clear line for what kforge-bot cannot run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kforge_bot.config.policy import Policy
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import KernelSpec, has_own_reference, kernel_implementation, load_spec
from kforge_bot.kernelspec.gpumode import is_gpumode_problem, load_gpumode
from kforge_bot.kernelspec.kernels import discover

GM = Path(__file__).parents[1] / "data" / "gpumode"
PROBLEM = GM / "scaled_add_py"


def test_a_problem_folder_or_its_task_yml_loads_as_a_spec() -> None:
    for path in (PROBLEM, PROBLEM / "task.yml"):
        spec = load_spec(path)
        assert spec.format == "gpumode" and spec.name == "scaled_add_py"
        assert (spec.entry, spec.kernel_file) == ("custom_kernel", "submission.py")
        assert (spec.reference.symbol, spec.inputs_symbol) == ("ref_kernel", "generate_input")
        # tests then benchmarks, every seed dropped (the harness passes its own as seed=)
        assert spec.shape_sets == ({"size": 33}, {"size": 64}, {"size": 96})
        assert spec.timed_shapes == (2,) and spec.timed_indices() == (2,)
        assert spec.seed_kwarg == "seed" and spec.data_arg
        assert spec.oracle_symbol == "check_implementation"
        assert spec.tolerance == {"atol": 0.01, "rtol": 0.01}
        # files: names task.py here and utils.py one folder up; the evaluator (config.main) is not needed
        assert dict(spec.support) == {"task.py": (PROBLEM / "task.py").read_text(),
                                      "utils.py": (GM / "utils.py").read_text()}
        assert KernelSpec.from_dict(spec.to_dict()) == spec
        assert has_own_reference(spec)  # ref_kernel judges, whatever submission.py holds (the gate's oracle)
        # speed is measured against ref_kernel; submission.py is the kernel as written (the gate, check without it)
        assert spec.baseline == spec.reference
        assert kernel_implementation(spec) == spec.kernel and spec.kernel.filename == "submission.py"
        assert spec.kernel.symbol == "custom_kernel" and spec.kernel.source == (PROBLEM / "submission.py").read_text()


def test_without_files_benchmarks_or_tolerance() -> None:
    spec = load_gpumode(GM / "lax_check_py")
    assert [name for name, _ in spec.support] == ["task.py"]
    assert spec.timed_indices() == (0, 1)  # no benchmarks: the tests are timed
    assert spec.tolerance is None
    assert spec.shape_sets == ({"n": 50}, {"n": 70})
    assert spec.kernel is None and kernel_implementation(spec) == spec.reference  # no submission.py


def test_other_formats_keep_every_shape_set_timed() -> None:
    spec = load_spec(Path(__file__).parents[1] / "data" / "kb" / "softmax.py")
    assert spec.timed_shapes is None and spec.timed_indices() == tuple(range(len(spec.shape_sets)))
    assert not spec.data_arg and spec.seed_kwarg is None and spec.support == ()


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(GM, tmp_path / "gm")
    return tmp_path / "gm" / "scaled_add_py"


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('lang: "py"', 'lang: "cu"'), r"lang: 'cu' problems are not supported"),
    (lambda t: t.replace("tests:", "checks:"), r"tests: expected a non-empty list of keyword sets"),
    (lambda t: t + "multi_gpu: true\n", r"a multi-GPU problem"),
    (lambda t: t.replace('"source": "../utils.py"', '"source": "/etc/utils.py"'), r"must be relative"),
    (lambda t: t.replace('"source": "../utils.py"', '"source": "../missing.py"'), r"file not found"),
    (lambda t: t.replace("tolerance: {atol: 1.0e-2, rtol: 1.0e-2}", "tolerance: {atol: -1}"),
     r"tolerance: expected \{atol: number, rtol: number\}"),
    (lambda t: t.replace('tests:\n  - {"size": 33, "seed": 4242}\n  - {"size": 64, "seed": 5236}\n',
                         "tests: [1, 2]\n"), r"tests: expected a non-empty list"),
    (lambda t: t + "tests: [1, 2]\n", r"duplicate key 'tests'"),
])
def test_bad_task_yml_is_one_line_naming_the_file(tmp_path: Path, edit, message: str) -> None:
    import re

    problem = _copy(tmp_path)
    task = problem / "task.yml"
    task.write_text(edit(task.read_text()))
    with pytest.raises(KforgeError) as info:
        load_spec(problem)
    text = str(info.value)
    assert "\n" not in text and re.search(message, text), text
    assert "task.yml" in text or "missing.py" in text


def test_a_reference_without_generate_input_names_it(tmp_path: Path) -> None:
    problem = _copy(tmp_path)
    ref = problem / "reference.py"
    ref.write_text(ref.read_text().replace("def generate_input", "def make_input"))
    with pytest.raises(KforgeError, match=r"reference\.py.*defines no top-level 'generate_input'"):
        load_spec(problem)


def test_a_folder_without_reference_is_no_gpumode_problem(tmp_path: Path) -> None:
    problem = _copy(tmp_path)
    (problem / "reference.py").unlink()
    assert not is_gpumode_problem(problem)
    with pytest.raises(KforgeError, match="directory has no kforge.yaml"):
        load_spec(problem)


def test_discover_lists_gpumode_problems_and_keeps_a_broken_one(tmp_path: Path) -> None:
    problem = _copy(tmp_path)
    (problem / "task.yml").write_text((problem / "task.yml").read_text().replace('lang: "py"', 'lang: "cu"'))
    found = discover(tmp_path, Policy())
    assert set(found) == {"gm/scaled_add_py", "gm/lax_check_py", "gm/fresh_out_py"}
    good, bad = found["gm/lax_check_py"], found["gm/scaled_add_py"]
    assert (good.format, good.file, good.error) == ("gpumode", "gm/lax_check_py/submission.py", None)
    assert good.spec is not None and good.spec.format == "gpumode"
    assert bad.spec is None and "lang: 'cu'" in (bad.error or "")


def test_a_forward_and_backward_problem_is_refused_with_the_supported_layouts(tmp_path: Path) -> None:
    folder = tmp_path / "swiglu"
    folder.mkdir()
    (folder / "task.yml").write_text('lang: "py"\ntests:\n  - {"n": 64, "seed": 1}\n')
    (folder / "eval.py").write_text("# the problem's own evaluator\n")
    (folder / "reference.py").write_text(
        "import torch\n\n\ndef generate_inputs(n, seed=0):\n    return torch.randn(n), torch.randn(n)\n\n\n"
        "def reference_forward(gate, up):\n    return torch.nn.functional.silu(gate) * up\n\n\n"
        "def reference_backward(gate, up, grad):\n    return grad * up, grad * gate\n")
    with pytest.raises(KforgeError) as caught:
        load_gpumode(folder)
    text = str(caught.value)
    assert "\n" not in text and "reference.py" in text and "forward-and-backward" in text
    assert "generate_input(**kw) and ref_kernel(data)" in text and "backward:" in text
