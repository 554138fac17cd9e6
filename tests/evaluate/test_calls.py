"""A library's kernels as written (tests/data/library_repo, torch stand-ins for Triton kernels under src/): outputs
selected from what a launcher returns, inputs written in place, gradients through an autograd.Function, and a
launcher in another file than the kernel the bot rewrites; each in sandboxed workers, where the machine has them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kforge_bot.evaluate import isolation as sandboxing
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.kernelspec import KernelSpec, load_manifest

LIBRARY = Path(__file__).parents[1] / "data" / "library_repo"


@pytest.fixture
def library(tmp_path: Path) -> dict[str, KernelSpec]:
    """A copy (so nothing is written beside the fixture), loaded."""
    shutil.copytree(LIBRARY, tmp_path / "lib")
    return load_manifest(tmp_path / "lib" / "kforge.yaml")


def _isolation() -> str:
    return "required" if sandboxing.probe().available else "off"


def _check(spec: KernelSpec, source: str | None = None, *, measure: bool = False) -> EvalResult:
    """The kernel as written (or `source` as new text for its file) against the manifest's reference."""
    candidate = spec.baseline if source is None else spec.candidate_from_source(source)
    settings = EvalSettings(seeds=2, measure=measure, profile=False, timing_budget_s=0.3, min_pairs=3,
                            allow_framework_fallback=True, isolation=_isolation())
    return evaluate(spec, candidate, "cpu", settings, baseline=spec.reference)


def _kernel_text(spec: KernelSpec) -> str:
    return spec.kernel_path.read_text()


@pytest.mark.slow
def test_outputs_are_selected_from_a_tuple_and_from_a_dict(library: dict[str, KernelSpec]) -> None:
    """rms_norm_forward returns (Y, X, RSTD, BLOCK_SIZE, num_warps): only Y is compared; the swiglu launcher
    returns a dict: only its 'out'."""
    for name in ("rms_norm", "swiglu"):
        result = _check(library[name], measure=True)
        assert result.verdict == "pass", (name, result.reason)
        assert [len(r["outputs"]) for r in result.correctness["records"]] == [1] * len(result.correctness["records"])
    # The selection holds: a launcher whose first return is another tensor is wrong, whatever else it returns.
    swapped = _kernel_text(library["rms_norm"]).replace("return X * rstd * W, X, rstd,", "return rstd * X, X, W * rstd,")
    result = _check(library["rms_norm"], swapped)
    assert result.verdict == "incorrect", result.reason
    # And a return that aliases an input is still rejected where it is selected.
    aliased = _kernel_text(library["rms_norm"]).replace("return X * rstd * W, X,", "return X, X * rstd * W,")
    assert _check(library["rms_norm"], aliased).verdict == "rejected"


@pytest.mark.slow
def test_a_launcher_in_another_file_runs_the_candidate_text_of_the_kernel_file(
        library: dict[str, KernelSpec]) -> None:
    """`file:` is what the bot rewrites; the launcher (`entry: launch/swiglu.py:swiglu`) imports it by module name,
    and so gets the candidate's text, not the file on disk, in the package its own __init__ imports too."""
    spec = library["swiglu"]
    assert spec.kernel_file == "src/minilib/ops/act.py" and spec.entry_file == "launch/swiglu.py"
    wrong = _kernel_text(spec).replace("torch.nn.functional.silu(a) * b", "torch.sigmoid(a) * b")
    result = _check(spec, wrong)
    assert result.verdict == "incorrect", result.reason
    assert _check(spec, _kernel_text(spec)).verdict == "pass"


@pytest.mark.slow
def test_a_kernel_that_writes_its_declared_inputs_in_place_is_compared_on_them(
        library: dict[str, KernelSpec]) -> None:
    """RoPE rotates q and k in place (`inplace: [q, k]`), against an out-of-place reference returning them; timed
    with the inputs put back between samples."""
    result = _check(library["rope"], measure=True)
    assert result.verdict == "pass", result.reason
    assert [len(r["outputs"]) for r in result.correctness["records"]][0] == 2
    assert "put back between samples" in result.details["timing"][0]["mode_note"]


@pytest.mark.slow
def test_an_in_place_kernel_that_also_writes_another_input_is_rejected(library: dict[str, KernelSpec]) -> None:
    scribbles = _kernel_text(library["rope"]).replace("    return q.transpose", "    cos.mul_(1.5)\n    return q.transpose")
    result = _check(library["rope"], scribbles)
    assert result.verdict == "rejected", result.reason
    assert "input 2 was modified in place" in result.reason and "declared in place: 0, 1" in result.reason


@pytest.mark.slow
def test_an_in_place_kernel_that_writes_wrong_values_is_incorrect(library: dict[str, KernelSpec]) -> None:
    wrong = _kernel_text(library["rope"]).replace("b * cos[..., half:] + a * sin", "b * cos[..., half:] - a * sin")
    result = _check(library["rope"], wrong)
    assert result.verdict == "incorrect", result.reason


BACKWARDS = ["rms_norm_autograd", "rms_norm_launchers"]  # an autograd.Function; a backward launcher


@pytest.mark.slow
@pytest.mark.parametrize("name", BACKWARDS)
def test_a_backward_is_checked_against_the_references_autograd_and_timed_by_direction(
        library: dict[str, KernelSpec], name: str) -> None:
    spec = library[name]
    result = _check(spec, measure=True)
    assert result.verdict == "pass", result.reason
    outputs = result.correctness["records"][0]["outputs"]
    assert [o["shape"] for o in outputs] == [[64, 96], [64, 96], [96]]  # y, then dx and dweight
    directions = result.details["directions"]
    assert set(directions) == {"forward", "backward", "forward+backward"}
    for figures in directions.values():
        assert figures["speedup"] > 0 and figures["baseline"]["median_ms"] > 0 and figures["candidate"]["samples"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", BACKWARDS)
def test_a_wrong_gradient_is_incorrect_and_named(library: dict[str, KernelSpec], name: str) -> None:
    spec = library[name]
    wrong = _kernel_text(spec).replace("dW = (dY * xhat).sum(0)", "dW = (dY * xhat).sum(0) * 1.01")
    result = _check(spec, wrong)
    assert result.verdict == "incorrect", result.reason
    assert f"the gradient of input {spec.grad_inputs[1]}" in result.reason
    # The forward is the same text: it alone would pass.
    assert _check(spec, _kernel_text(spec)).verdict == "pass"


@pytest.mark.slow
def test_a_backward_kernel_timed_against_itself_passes_every_check_after_timing(
        library: dict[str, KernelSpec]) -> None:
    """The gate's comparison: the kernel against another version of itself, both wrapped alike. Each timed input
    set keeps its own upstream gradients (a set's are not another's, whatever list holds its tensors)."""
    spec = library["rms_norm_autograd"]
    settings = EvalSettings(seeds=2, profile=False, timing_budget_s=0.3, min_pairs=3, allow_framework_fallback=True,
                            isolation=_isolation())
    result = evaluate(spec, spec.baseline, "cpu", settings, baseline=spec.baseline)
    assert result.verdict == "pass", result.reason
    assert result.correctness["timed_outputs_checked"] > 0 and "directions" in result.details


def test_upstream_gradients_follow_the_seed_bound_to_the_input_set() -> None:
    """Each input set's upstream gradients come from its seed, however the set reaches the call (the harness
    unpacks it into arguments): the reference's worker and the candidate's draw the same ones."""
    import torch

    from kforge_bot.evaluate.worker.calls import EntryCall

    spec = load_manifest(LIBRARY / "kforge.yaml")["rms_norm_autograd"]

    def scale(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * weight

    inputs = [torch.randn(4, 8), torch.rand(8) + 0.5]
    grads = {}
    for seed in (1, 2, 1):
        entry = EntryCall(scale, scale, spec, own_oracle=True)
        entry.bind(inputs, seed)
        grads.setdefault(seed, []).append(entry(*inputs)[1])
    assert torch.equal(grads[1][0], grads[1][1])  # the same seed, the same upstream gradient
    assert not torch.equal(grads[1][0], grads[2][0])  # another seed, another one


def test_rebinding_an_input_set_redraws_its_upstream_gradients_in_the_same_memory() -> None:
    """After timing, the harness moves another set's values (and seed) into a set's buffers. A backward replayed
    from a CUDA graph reads its upstream gradients from the memory it was captured on: they must change there
    (new tensors left a replayed RMSNorm backward on the old seed's gradients: wrong everywhere on the H200)."""
    import torch

    from kforge_bot.evaluate.worker.calls import EntryCall

    spec = load_manifest(LIBRARY / "kforge.yaml")["rms_norm_autograd"]
    inputs = [torch.randn(4, 8), torch.rand(8) + 0.5]
    outs = [torch.empty(4, 8)]
    entry = EntryCall(torch.mul, torch.mul, spec, own_oracle=True)
    entry.bind(inputs, 1)
    first = entry.upstream(inputs, outs)[0]
    address, old = first.data_ptr(), first.clone()
    entry.bind(inputs, 2)
    again = entry.upstream(inputs, outs)[0]
    fresh = EntryCall(torch.mul, torch.mul, spec, own_oracle=True)
    fresh.bind(inputs, 2)
    assert again.data_ptr() == address
    assert torch.equal(first, fresh.upstream(inputs, outs)[0]) and not torch.equal(first, old)
