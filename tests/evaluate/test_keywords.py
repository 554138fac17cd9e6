"""What a manifest could not say before (issue 45), on tests/data/library_keywords (torch stand-ins for Triton
kernels under src/): keyword-only arguments per entry and per shape set, a backward with its own tolerance, an
import-time variable (`env:`) and a package whose __init__ is never run (`package_init: false`); each in sandboxed
workers, where the machine has them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kforge_bot.errors import KforgeError
from kforge_bot.evaluate import isolation as sandboxing
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.kernelspec import KernelSpec, load_manifest

LIBRARY = Path(__file__).parents[1] / "data" / "library_keywords"


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    shutil.copytree(LIBRARY, tmp_path / "lib")
    return tmp_path / "lib"


def _edit(lib: Path, name: str, **changes) -> KernelSpec:
    """The manifest with kernel `name`'s keys changed (None: removed), loaded."""
    data = yaml.safe_load((lib / "kforge.yaml").read_text())
    for key, value in changes.items():
        if value is None:
            data["kernels"][name].pop(key, None)
        else:
            data["kernels"][name][key] = value
    (lib / "kforge.yaml").write_text(yaml.safe_dump(data))
    return load_manifest(lib / "kforge.yaml")[name]


def _check(spec: KernelSpec, source: str | None = None) -> EvalResult:
    candidate = spec.baseline if source is None else spec.candidate_from_source(source)
    isolation = "required" if sandboxing.probe().available else "off"
    settings = EvalSettings(seeds=2, measure=False, profile=False, allow_framework_fallback=True, isolation=isolation)
    return evaluate(spec, candidate, "cpu", settings, baseline=spec.reference)


@pytest.mark.slow
def test_keyword_arguments_reach_the_entry_and_the_reference(lib: Path) -> None:
    """Before: the harness called fn(*inputs), so gelu was checked only at approximate="none". The entry's kwargs
    reach both sides: a kernel that ignores them is incorrect."""
    specs = load_manifest(lib / "kforge.yaml")
    assert specs["gelu_tanh"].call_kwargs == {"approximate": "tanh"}
    for name in ("gelu_tanh", "scaled_add"):
        result = _check(specs[name])
        assert result.verdict == "pass", (name, result.reason)
    text = (lib / "src/kwlib/ops/act.py").read_text()
    ignores = text.replace("approximate=approximate)", "approximate=\"none\")")
    assert _check(specs["gelu_tanh"], ignores).verdict == "incorrect"
    # The shape set's own alpha (3.0) and the entry's dtype (float64) both arrive: a kernel that fixes alpha at the
    # entry's 0.5 fails on that set only; one that ignores the dtype fails everywhere.
    fixed = text.replace("return (x + alpha * y).to(dtype)", "return (x + 0.5 * y).to(dtype)")
    result = _check(specs["scaled_add"], fixed)
    assert result.verdict == "incorrect" and "shape set 1" in result.reason, result.reason
    no_dtype = text.replace("return (x + alpha * y).to(dtype)", "return x + alpha * y")
    assert _check(specs["scaled_add"], no_dtype).verdict == "incorrect"


@pytest.mark.slow
def test_an_autograd_function_gets_keywords_by_position_and_its_backward_its_own_tolerance(lib: Path) -> None:
    spec = load_manifest(lib / "kforge.yaml")["softplus_autograd"]
    assert spec.tolerance == {"atol": 1e-6, "rtol": 1e-6} and spec.backward_tolerance == {"atol": 1e-2, "rtol": 1e-2}
    result = _check(spec)
    assert result.verdict == "pass", result.reason
    # One tolerance for both directions (the forward's): the float16 gradient no longer passes.
    tight = _edit(lib, "softplus_autograd", tolerance={"atol": 1e-6, "rtol": 1e-6})
    result = _check(tight)
    assert result.verdict == "incorrect" and "gradient" in result.reason, result.reason


@pytest.mark.slow
def test_env_and_package_init_let_a_package_import_that_otherwise_does_not(lib: Path) -> None:
    """Library C's kernels could not be imported without its training stack, Library B's without GEMS_VENDOR."""
    without_env = _edit(lib, "gelu_tanh", env=None)
    result = _check(without_env)
    assert result.verdict in ("error", "compile_error") and "KWLIB_BACKEND" in result.reason, result.reason
    with_init = _edit(lib, "softplus_autograd", package_init=None)
    result = _check(with_init)
    assert result.verdict in ("error", "compile_error") and "KWLIB_BACKEND" in result.reason, result.reason


@pytest.mark.parametrize("env", [{"LD_PRELOAD": "/tmp/x.so"}, {"PYTHONPATH": "/tmp"}, {"TRITON_CACHE_DIR": "/x"},
                                 {"KFORGE_CACHE_DIR": "/x"}, {"lower": "x"}, {"KWLIB_MODE": "a\nb"}])
def test_env_names_outside_the_allowlist_are_refused_in_one_line(lib: Path, env: dict[str, str]) -> None:
    with pytest.raises(KforgeError, match=r"kernels\.gelu_tanh\.env"):
        _edit(lib, "gelu_tanh", env=env)


def test_keyword_values_must_be_plain(lib: Path) -> None:
    with pytest.raises(KforgeError, match=r"kernels\.gelu_tanh\.kwargs: expected a mapping"):
        _edit(lib, "gelu_tanh", kwargs={"approximate": {"nested": 1}})
    with pytest.raises(KforgeError, match=r"shapes\[0\]\.kwargs"):
        _edit(lib, "gelu_tanh", kwargs={"approximate": "tanh"}, shapes=[{"n": 4, "kwargs": ["x"]}])


@pytest.mark.slow
def test_backward_through_an_in_place_forward_is_checked_and_timed(lib: Path) -> None:
    """RoPE's backward entries had to use a copying path: `backward` with `inplace` was refused. Both directions are
    now checked (the in-place results, then the gradients) and timed, each side's forward starting from the inputs
    as they were made."""
    spec = load_manifest(lib / "kforge.yaml")["rotate_inplace"]
    isolation = "required" if sandboxing.probe().available else "off"
    settings = EvalSettings(seeds=2, measure=True, profile=False, timing_budget_s=0.3, min_pairs=3,
                            allow_framework_fallback=True, isolation=isolation)
    result = evaluate(spec, spec.baseline, "cpu", settings, baseline=spec.reference)
    assert result.verdict in ("pass", "improved", "regression", "inconclusive"), result.reason
    assert {"forward", "backward"} <= set(result.details["directions"])
    wrong = (lib / "src/kwlib/ops/act.py").read_text().replace("return dq * 2.0, dk", "return dq, dk")
    assert _check(spec, wrong).verdict == "incorrect"


GRAD_WRITERS = ["mul_autograd", "mul_launchers"]  # an autograd.Function; a forward and a backward launcher


@pytest.mark.slow
@pytest.mark.parametrize("name", GRAD_WRITERS)
def test_a_backward_that_writes_its_gradients_into_saved_inputs_is_checked_on_what_it_wrote(
        lib: Path, name: str) -> None:
    """Liger's SwiGLU writes da into a and db into b: before, an input written by the backward was only ever
    `rejected`. Declared (`backward.inplace`), the buffers after the call are the gradients compared, and timed
    with them put back between samples."""
    spec = load_manifest(lib / "kforge.yaml")[name]
    assert spec.grad_inputs == (0, 1) and spec.grad_inplace == (0, 1)
    isolation = "required" if sandboxing.probe().available else "off"
    settings = EvalSettings(seeds=2, measure=True, profile=False, timing_budget_s=0.3, min_pairs=3,
                            allow_framework_fallback=True, isolation=isolation)
    result = evaluate(spec, spec.baseline, "cpu", settings, baseline=spec.reference)
    assert result.verdict in ("pass", "improved", "regression", "inconclusive"), result.reason
    assert {"forward", "backward"} <= set(result.details["directions"])
    text = (lib / "src/kwlib/ops/mul.py").read_text()
    # What it writes is what is compared: a wrong value written (and returned, the same memory) is incorrect.
    wrong = _check(spec, text.replace("a.copy_(da)", "a.copy_(da * 1.5)"))
    assert wrong.verdict == "incorrect" and "the gradient of input 0, as written into it" in wrong.reason, wrong.reason


@pytest.mark.slow
@pytest.mark.parametrize("name", GRAD_WRITERS)
def test_a_backward_that_disagrees_with_its_declaration_says_how_in_one_line(lib: Path, name: str) -> None:
    spec = load_manifest(lib / "kforge.yaml")[name]
    text = (lib / "src/kwlib/ops/mul.py").read_text()
    returns_new = text.replace("    a.copy_(da)\n    b.copy_(db)\n    return a, b", "    return da, db")
    result = _check(spec, returns_new)
    assert result.verdict == "incorrect" and "backward.inplace declares that the backward writes the gradient of " \
        "input a into it, but the call left it as it was" in result.reason, result.reason
    # Writes one thing, returns another: the right gradient returned does not hide a wrong one written.
    two_answers = text.replace("a.copy_(da)", "a.copy_(da * 1.5)").replace("b.copy_(db)\n    return a, b\n",
                                                                                  "b.copy_(db)\n    return da, db\n")
    result = _check(spec, two_answers)
    assert result.verdict == "incorrect" and "returned a gradient of input a other than what it wrote into a" \
        in result.reason, result.reason
    assert "\n" not in result.reason


@pytest.mark.slow
def test_a_gradient_the_forward_writes_into_its_input_is_checked_where_it_ends(lib: Path) -> None:
    """Liger's cross-entropy writes the gradient into the logits in its forward and scales it there in its backward:
    the memory after the whole call is compared."""
    spec = load_manifest(lib / "kforge.yaml")["cube_sum_autograd"]
    result = _check(spec)
    assert result.verdict == "pass", result.reason
    text = (lib / "src/kwlib/ops/mul.py").read_text()
    unscaled = _check(spec, text.replace("return x.mul_(grad)", "return x * grad"))
    assert unscaled.verdict == "incorrect" and "returned a gradient of input x other than what it wrote into x" \
        in unscaled.reason, unscaled.reason


@pytest.mark.slow
def test_a_gradient_written_into_an_input_undeclared_is_rejected_with_the_declaration_to_make(lib: Path) -> None:
    """The finding the Liger example kept: without `backward.inplace` the write is still refused, now naming it."""
    spec = _edit(lib, "mul_autograd", backward={"inputs": ["a", "b"]})
    result = _check(spec)
    assert result.verdict == "rejected", result.reason
    assert "input a was modified in place" in result.reason and "backward.inplace: [a]" in result.reason


@pytest.mark.parametrize(("backward", "extra", "message"), [
    ({"inputs": ["a"], "inplace": ["b"]}, {}, r"backward\.inplace: 1 is not in backward\.inputs"),
    ({"inputs": ["a", "b"], "inplace": ["a"]}, {"inplace": ["a"], "outputs": []},
     r"backward\.inplace: input 0 is also in inplace"),
    ({"inputs": ["a"], "inplace": ["c"]}, {}, r"backward\.inplace: the entry has no parameter 'c'"),
    ({"inputs": ["a"], "inplace": [{"a": 1}]}, {}, r"backward\.inplace: expected an index"),
])
def test_backward_inplace_is_validated_in_one_line(lib: Path, backward: dict, extra: dict, message: str) -> None:
    with pytest.raises(KforgeError, match=rf"kforge\.yaml: kernels\.mul_autograd\.{message}") as caught:
        _edit(lib, "mul_autograd", backward=backward, **extra)
    assert "\n" not in str(caught.value)
