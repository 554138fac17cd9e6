"""The GPU test group: real Triton and CUDA C++ candidates and GPU-specific failures on a CUDA device.

Skipped where no CUDA device exists (see conftest.py); run on the H200 with `pytest -m gpu tests/test_gpu.py`.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.plan import DEVICE_SHARE, HOST_SHARE, Fit, Plan, memory_needs
from kforge_bot.evaluate.result import EvalSettings
from kforge_bot.spec import Implementation, load_spec

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parent / "data" / "gpu"
EXAMPLES = Path(__file__).parents[1] / "examples"
QUICK = EvalSettings(seeds=2, time_budget_s=1.0, timeout_s=240)


def _candidate(name: str) -> Implementation:
    return Implementation.from_file(DATA / name, "ModelNew")


def _problem():
    return load_spec(DATA / "problem.py")


def test_triton_candidate_passes_and_is_timed():
    result = evaluate(_problem(), _candidate("good_triton.py"), "cuda", QUICK)
    assert result.verdict == "pass", result.reason
    assert result.speedup is not None and result.speedup_ci[0] <= result.speedup <= result.speedup_ci[1]
    assert "H" in result.device_name or result.device_name  # the device's own name is reported
    assert result.profile["candidate"]["kernels"], "the profiler saw the Triton kernel"
    assert result.profile["candidate"]["streams_checked"] is True


def test_cuda_cpp_load_inline_candidate_passes():
    result = evaluate(_problem(), _candidate("cuda_inline.py"), "cuda", QUICK)
    assert result.verdict == "pass", result.reason


def test_a_legacy_stream_kernel_is_not_timed_from_an_empty_graph():
    """cuda_inline.py launches `<<<grid, block>>>` with no stream, as most hand-written CUDA does: a graph
    captured around it replays nothing. The capture must be refused and both sides timed eagerly, so the
    speedup is the real one (one fused kernel against torch's two: about 2x, never tens)."""
    result = evaluate(_problem(), _candidate("cuda_inline.py"), "cuda", QUICK)
    assert result.verdict == "pass", result.reason
    timing = result.details["timing"][0]
    assert timing["mode"] == "eager" and ("capture" in timing["mode_note"] or "replay" in timing["mode_note"]), timing
    assert result.speedup is not None and result.speedup < 4.0, result.reason


def test_illegal_memory_access_is_a_crash_and_the_next_evaluation_works():
    bad = evaluate(_problem(), _candidate("illegal_address.py"), "cuda", QUICK)
    assert bad.verdict == "crash", bad.reason
    assert "illegal" in bad.reason.lower() or "memory" in bad.reason.lower() or "SIG" in bad.reason
    good = evaluate(_problem(), _candidate("good_triton.py"), "cuda", EvalSettings(seeds=2, measure=False))
    assert good.verdict == "pass", good.reason


def test_spinning_kernel_times_out_and_the_gpu_stays_usable():
    hung = evaluate(_problem(), _candidate("hang.py"), "cuda", EvalSettings(seeds=2, measure=False, timeout_s=40))
    assert hung.verdict == "timeout", hung.reason
    good = evaluate(_problem(), _candidate("good_triton.py"), "cuda", EvalSettings(seeds=2, measure=False))
    assert good.verdict == "pass", good.reason


def test_a_kernel_that_hangs_after_a_fast_warm_up_costs_seconds_not_the_timeout():
    """Correct on the first calls, then a kernel that never returns: the no-progress limit (the stall floor
    here, 50x the reference's slowest call otherwise) ends it long before the 300 s timeout, and the GPU
    serves the next evaluation."""
    started = time.monotonic()
    hung = evaluate(_problem(), _candidate("hang_after_warmup.py"), "cuda",
                    EvalSettings(seeds=2, time_budget_s=1, timeout_s=300, stall_floor_s=8))
    assert hung.verdict == "timeout", hung.reason
    assert "made no progress for 8 s once built" in hung.reason
    assert time.monotonic() - started < 120
    good = evaluate(_problem(), _candidate("good_triton.py"), "cuda", EvalSettings(seeds=2, measure=False))
    assert good.verdict == "pass", good.reason


def test_a_large_problem_for_its_device_memory_budget_is_cut_down_or_refused_by_name(monkeypatch, tmp_path):
    """The budget comes from the device's free memory (KFORGE_MEMORY_BUDGET caps it): between what one seed
    and one timed set need and what the full plan needs, the evaluation is cut down and says so; below it,
    a one-line error names the sizes and the device memory, never a reference killed by SIGKILL."""
    spec, candidate = _problem(), _candidate("good_triton.py")
    settings = EvalSettings(seeds=2, time_budget_s=0.5, timeout_s=240)
    plan = Plan(role="candidate", target="cuda", spec=spec, baseline=spec.baseline, candidate=candidate,
                settings=settings, seeds=[1, 2], out_dir=tmp_path)
    size = [4 << 22]  # bytes of 1 << 22 fp32 values, in and out
    full, least = memory_needs(plan, size, size), memory_needs(plan.fitted(Fit(1, 1)), size, size)
    budget = int(1.05 * max(least[0] / DEVICE_SHARE, least[1] / HOST_SHARE))
    assert budget < max(full[0] / DEVICE_SHARE, full[1] / HOST_SHARE)
    monkeypatch.setenv("KFORGE_MEMORY_BUDGET", str(budget))
    cut = evaluate(spec, candidate, "cuda", settings)
    assert cut.verdict == "pass", cut.reason
    assert cut.details["memory_fit"]["seeds"] == 1, cut.details["memory_fit"]
    assert "to fit in memory" in cut.details["memory_fit"]["note"]
    monkeypatch.setenv("KFORGE_MEMORY_BUDGET", str(budget // 4))
    with pytest.raises(KforgeError) as refused:
        evaluate(spec, candidate, "cuda", settings)
    assert "does not fit on cuda: inputs of 16.8 MB and outputs of 16.8 MB per set" in str(refused.value)
    assert "of device memory free" in str(refused.value)


def test_side_stream_work_is_rejected():
    result = evaluate(_problem(), _candidate("side_stream.py"), "cuda", QUICK)
    assert result.verdict in ("rejected", "incorrect"), result.reason
    assert result.verdict != "pass"


def test_never_written_output_is_not_accepted():
    result = evaluate(_problem(), _candidate("never_written.py"), "cuda", QUICK)
    assert result.verdict in ("incorrect", "rejected"), result.reason


@pytest.mark.parametrize("kernel", ["softmax_triton", "rmsnorm_triton", "matmul_bias_relu_triton", "rmsnorm_cuda"])
def test_bundled_cuda_examples_are_correct_against_their_references(kernel):
    spec = load_spec(EXAMPLES / "kforge.yaml", kernel)
    result = evaluate(spec, spec.baseline, "cuda", EvalSettings(seeds=2, time_budget_s=1.0, timeout_s=300),
                      baseline=spec.reference)
    assert result.verdict == "pass", result.reason
    assert result.speedup is not None


def test_kernelbench_triton_example_passes():
    spec = load_spec(EXAMPLES / "kernelbench" / "softmax_problem.py")
    cand = Implementation.from_file(EXAMPLES / "kernelbench" / "softmax_triton.py", "ModelNew")
    result = evaluate(spec, cand, "cuda", QUICK)
    assert result.verdict == "pass", result.reason
