"""GPU MODE problems through the full evaluate() on the CPU: the harness's seeds, data as one object with its output
buffer, the problem's check_implementation beside the harness's own checks, and GPU MODE's documented exploits.

The fixture problems in tests/data/gpumode/ are in GPU MODE's layout (task.yml, reference.py, task.py, a shared
../utils.py) and written for these tests. Each candidate in tests/data/gpumode/candidates/ claims to solve
scaled_add_py; the exploits are the ones GPU MODE's EVALUATOR_SECURITY.md and their issues describe, as they apply
to a CPU: patching the trusted check or the helpers the reference uses in the same interpreter, timer patching,
monkeypatching torch, batch-and-skip (caching across calls), returning the reference's own output, the public seeds,
NaN outputs. (L2 persistence and side streams need a GPU: the harness's cache flush and busy-after check, tested in
tests/test_gpu.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from fakes.verdict_cases import SEEDS, Case, assert_verdict, judge_all, judging_settings

from kforge_bot.evaluate.worker import importing, loading
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.references import ReferenceStore
from kforge_bot.evaluate.wire.result import EvalResult
from kforge_bot.kernelspec import load_spec
from kforge_bot.kernelspec.gpumode import candidate_file

GM = Path(__file__).parents[1] / "data" / "gpumode"
PROBLEM = GM / "scaled_add_py"
CHECK, PROFILED, TIMED = judging_settings(timeout_s=90)

# candidate -> (settings, verdict, regex the reason must match)
CASES: dict[str, Case] = {
    # honest: the example submission writes the output buffer data carries; another returns a fresh tensor
    "submission": (TIMED, "pass", r"^correct on every case; "),
    "honest_fresh": (TIMED, "pass", r"^correct on every case; "),
    # check_implementation is an extra oracle: within the harness's (task.yml's) tolerance, outside the problem's own
    "near_miss": (CHECK, "incorrect", r"^shape set 0 \{'size': 33\} seed 11: the problem's check_implementation "
                                      r"failed: 1089 element\(s\) differ"),
    # ... and never instead of the harness's checks: it sees a copy of the inputs, the harness sees the change
    "mutate_input": (CHECK, "rejected", r"input 0 was modified in place"),
    "alias_input": (CHECK, "rejected", r"output 0 shares memory with input 0 \(outputs must not alias inputs\)"),
    # GPU MODE's in-process bypass: patch the trusted check's helper, return a wrong answer (watched: rejected)
    "patch_oracle": (CHECK, "rejected", r"the candidate replaced utils \(module\)\.close_enough \(while importing\)"),
    # ... or the helper the baseline enters, to slow the baseline (got through before: 129x on the CPU)
    "slow_baseline_helper": (TIMED, "rejected", r"the candidate replaced .*the baseline's module\.DeterministicContext "
                                                r"\(class\)\.__enter__.* \(while importing\)"),
    # timer patching and monkeypatching torch, by names the static scan cannot read
    "patch_timer": (CHECK, "rejected", r"the candidate replaced time\.perf_counter \(while importing\)"),
    "patch_torch": (CHECK, "rejected", r"the candidate replaced torch\.relu \(while importing\)"),
    # the seeds task.yml publishes: answers precomputed for them are wrong for the harness's seeds
    "public_seeds": (CHECK, "incorrect", r"^shape set 0 \{'size': 33\} seed 11: the problem's check_implementation "
                                         r"failed"),
    # batch-and-skip: work skipped for a buffer (or values) seen before
    "cache_by_pointer": (CHECK, "incorrect|rejected", r"check_implementation failed|result cached across calls"),
    "skip_seen_values": (TIMED, "incorrect|rejected", r"NaN/Inf values|result cached by input buffer or values"),
    "batch_and_skip": (TIMED, "incorrect|rejected", r"result cached|timed call's result differs"),
    # returning the reference's own output (import reference; ref_kernel(data)): the framework fallback rule
    "reference_fallback": (PROFILED, "rejected", r"still calls every framework op the reference uses"),
    # NaN never passes (an upstream check reporting max error nan read as a pass)
    "nan_output": (CHECK, "incorrect", r"output 0: 1089 NaN/Inf values where the reference is finite"),
}


def _path(name: str) -> Path:
    return PROBLEM / "submission.py" if name == "submission" else GM / "candidates" / f"{name}.py"


@pytest.fixture(scope="module")
def results() -> dict[str, EvalResult]:
    spec = load_spec(PROBLEM)
    store = ReferenceStore()
    try:
        return judge_all(spec, CASES, lambda name: candidate_file(spec, _path(name)), store)
    finally:
        store.cleanup()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpumode_candidate_verdict(name: str, results: dict[str, EvalResult]) -> None:
    _, verdict, pattern = CASES[name]
    assert_verdict(results[name], verdict, pattern)


@pytest.mark.slow
def test_the_harness_seeds_every_case_not_task_yml(results: dict[str, EvalResult]) -> None:
    result = results["submission"]
    assert result.correctness["seeds"] == SEEDS
    checked = {(r["shape_set"], r["seed"]) for r in result.correctness["records"] if r["case"].startswith("shape set")}
    assert {seed for _, seed in checked} <= set(SEEDS) and {s for s, _ in checked} == {0, 1, 2}
    # tests are checked only, benchmarks (shape set 2) are timed
    assert [t["shape_set"] for t in result.details["timing"]] == [2]


@pytest.mark.slow
def test_check_implementation_never_replaces_the_harness_comparison() -> None:
    """The lax problem's check_implementation looks at shape and dtype only: wrong values still fail."""
    spec = load_spec(GM / "lax_check_py")
    result = evaluate(spec, candidate_file(spec, GM / "lax_check_py" / "wrong_values.py"), "cpu", CHECK, seeds=SEEDS)
    assert result.verdict == "incorrect", result.reason
    assert re.search(r"^shape set 0 \{'n': 50\} seed 11: output 0: \d+ of 800 elements outside", result.reason)


def test_the_secret_seed_reaches_generate_input_and_data_is_one_object(tmp_path: Path) -> None:
    spec = load_spec(PROBLEM)
    module = importing.import_implementation(spec.inputs_source, tmp_path, "inputs", spec.support)
    inputs = loading.make_inputs(spec, module, spec.shape_sets[0], 987654321, torch.device("cpu"))
    a, b, out = module.generate_input(size=33, seed=987654321)
    assert isinstance(inputs, loading.DataInputs) and len(inputs) == 3
    assert torch.equal(inputs[0], a) and torch.equal(inputs[1], b)
    public_a, _, _ = module.generate_input(size=33, seed=4242)  # task.yml's seed for this set: not used
    assert not torch.equal(inputs[0], public_a)
    seen = []
    loading.call(lambda data: seen.append(data) or data[2], inputs)
    assert isinstance(seen[0], tuple) and len(seen[0]) == 3 and seen[0][0] is inputs[0]


@pytest.mark.slow
@pytest.mark.parametrize("candidate,verdict,pattern", [
    # pmpp_v2 matmul_py's layout: the reference returns a @ b, submissions write data's c (rejected before as
    # "output 0 shares memory with input 2" on the H200: the reference never wrote c, so c was no output buffer)
    ("submission.py", "pass", r"^correct on every case"),
    # ... while an input the reference reads stays an input
    ("into_input_a.py", "rejected", r"shares memory with input 0|input 0 was modified in place"),
])
def test_an_output_buffer_the_reference_never_reads_is_the_submissions_to_write(
        candidate: str, verdict: str, pattern: str) -> None:
    spec = load_spec(GM / "fresh_out_py")
    result = evaluate(spec, candidate_file(spec, GM / "fresh_out_py" / candidate), "cpu", TIMED, seeds=SEEDS)
    assert result.verdict == verdict, result.reason
    assert re.search(pattern, result.reason), result.reason


def test_unread_inputs_are_the_ones_the_answer_does_not_depend_on() -> None:
    from kforge_bot.evaluate.wire.checks import unread_inputs

    def make() -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(3)
        return [torch.randn(4, 4, generator=gen), torch.randint(0, 4, (4,), generator=gen),
                torch.zeros(4, 4), torch.full((3,), 7)]

    def reference(values: list[torch.Tensor]) -> list[torch.Tensor]:
        x, index, _, constant = values
        return [x[index] + constant.sum()]

    # x is read; the float buffer is not; integer inputs are never probed (other values could be offsets out of
    # bounds); an input that cannot take other values (an expanded view) counts as read, and nothing crashes
    assert unread_inputs(make, reference, reference(make()), seed=5, count=4) == {2}

    def make_expanded() -> list[torch.Tensor]:
        x, index, _, constant = make()
        return [x, index, torch.zeros(4).expand(4, 4), constant]

    assert unread_inputs(make_expanded, reference, reference(make()), seed=5, count=4) == set()
