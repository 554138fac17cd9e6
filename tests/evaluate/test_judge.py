"""The verdict (evaluate.judge): how the candidate's worker ended, the profile's rules and the statistics from
raw samples. Comparisons of real outputs run through evaluate() in test_evaluate.py and test_adversarial.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_bot.evaluate.judge import _attach_timing, _profile_rejection, _sum_stats, judge
from kforge_bot.evaluate.wire.plan import Plan
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings, TimingStats
from kforge_bot.evaluate.sandbox import WorkerOutcome
from kforge_bot.kernelspec import Implementation, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"
REFERENCE = {"device_name": "cpu (test)", "target_info": {"kind": "cpu"}, "input_bytes": [65536]}


def _plan(tmp_path: Path, **settings: object) -> Plan:
    spec = load_spec(ADV / "problem.py")
    candidate = Implementation.from_file(ADV / "honest.py", "ModelNew")
    return Plan(role="candidate", target="cpu", spec=spec, baseline=spec.baseline, candidate=candidate,
                settings=EvalSettings(**settings), seeds=[11, 22], out_dir=tmp_path)


def _outcome(message: dict[str, object] | None = None, **outcome: object) -> WorkerOutcome:
    return WorkerOutcome(messages=[{"type": "result", **message}] if message else [], **outcome)


@pytest.mark.parametrize(("outcome", "verdict", "reason"), [
    (_outcome(flooded="a line over 8 MiB"), "rejected", "the candidate flooded the result channel (a line over 8 MiB)"),
    (_outcome(timed_out=True, wall_s=61, built=True), "timeout", "the candidate timed out after 61 s (hang"),
    (_outcome(returncode=0), "rejected", "the candidate's process exited before the harness finished (early exit)"),
    (_outcome(returncode=0, forged_lines=2), "rejected", "(early exit) after writing 2 unsigned line(s) to the result"),
    (_outcome(returncode=-11), "crash", "the candidate's process killed by SIGSEGV"),
    (_outcome({"status": "compile_error", "reason": "SyntaxError: x", "detail": "tb"}), "compile_error",
     "SyntaxError: x"),
    (_outcome({"status": "unavailable", "reason": "no GPU"}), "crash", "no GPU"),
])
def test_a_worker_that_ended_without_an_ok_outcome(tmp_path: Path, outcome: WorkerOutcome, verdict: str,
                                                  reason: str) -> None:
    result = judge(_plan(tmp_path), outcome, {}, REFERENCE)
    assert result.verdict == verdict and reason in result.reason, (result.verdict, result.reason)
    assert result.device_name == "cpu (test)" and result.details["input_bytes"] == [65536]
    assert result.details["isolation"] == "not sandboxed" and result.speedup is None
    if outcome.forged_lines:
        assert result.details["forged_lines"] == outcome.forged_lines
    if outcome.result:
        assert result.details["traceback"] == outcome.result.get("detail", "")


def test_a_framework_fallback_is_rejected_and_side_stream_kernels_alone_are_not(tmp_path: Path) -> None:
    """KernelBench L1 72 and 75 (cuDNN's grouped transposed convolutions, which fork and join streams) were
    rejected against themselves on the H200 for their side-stream kernels; work that escapes the timer is caught
    in the timed samples instead (tests/evaluate/test_timing.py)."""
    plan = _plan(tmp_path)
    side = {"candidate": {"side_stream_kernels": ["k1", "k2"], "compute_ops": []}}
    assert _profile_rejection(plan, side) is None
    fallback = {"reference": {"compute_ops": ["aten::softmax"]},
                "candidate": {"compute_ops": ["aten::softmax", "aten::add"]}}
    assert "falls back to the framework" in _profile_rejection(plan, fallback)
    assert _profile_rejection(_plan(tmp_path, allow_framework_fallback=True), fallback) is None
    own = {"reference": {"compute_ops": ["aten::softmax"]}, "candidate": {"compute_ops": ["aten::exp"]}}
    assert _profile_rejection(plan, own) is None


def test_the_speedup_and_its_interval_come_from_the_raw_pairs() -> None:
    result = EvalResult(verdict="pass", reason="", target="cpu")
    baseline = [2.0 + 0.01 * (i % 7) for i in range(60)]
    candidate = [1.0 + 0.005 * (i % 5) for i in range(60)]
    _attach_timing(result, [{"shape": 0, "baseline_ms": baseline, "candidate_ms": candidate, "calls_per_sample": 1,
                             "stop_reason": "reached 60 pairs", "wall_s": 0.5}], EvalSettings())
    assert result.speedup == pytest.approx(2.0, rel=0.02)
    low, high = result.speedup_ci
    assert low < result.speedup < high and high / low < 1.2
    shape = result.details["timing"][0]
    assert (shape["shape_set"], shape["pairs"], shape["mode"], shape["stop_reason"]) == (0, 60, "eager",
                                                                                         "reached 60 pairs")
    assert result.baseline.samples == 60 and result.candidate.median_ms == pytest.approx(1.01, abs=0.01)


def test_a_handful_of_pairs_gives_no_interval_and_says_why() -> None:
    result = EvalResult(verdict="pass", reason="", target="cpu")
    _attach_timing(result, [{"shape": 0, "baseline_ms": [2.0, 2.1], "candidate_ms": [1.0, 1.1]}], EvalSettings())
    assert result.speedup is not None and result.speedup_ci is None
    assert result.details["speedup_ci_note"].startswith("too few pairs (2) for a 95.0% confidence interval")


def test_one_call_on_every_shape_set_adds_up() -> None:
    a = TimingStats(median_ms=1.0, q1_ms=0.9, q3_ms=1.1, min_ms=0.8, samples=30)
    b = TimingStats(median_ms=2.0, q1_ms=1.8, q3_ms=2.2, min_ms=1.7, samples=40)
    total = _sum_stats([a, b])
    assert (total.median_ms, total.q1_ms, total.q3_ms, total.min_ms) == pytest.approx((3.0, 2.7, 3.3, 2.5))
    assert total.samples == 70


def test_output_files_must_be_the_ones_the_worker_saved(tmp_path: Path) -> None:
    # The candidate's scratch holds its outputs and its code can write there: a file the worker never reported
    # saving (planted), one it reported but that is gone (deleted), and one whose content changed are rejected.
    import torch

    from kforge_bot.evaluate.wire import tensorfile

    plan = _plan(tmp_path, measure=False)
    x = torch.randn(64, 256)
    ref = {c.ref_file: [torch.softmax(x, dim=1)] for c in plan.correctness_cases()}
    ref["ref_0_1.out"] = ref["ref_0_0.out"]

    def run(saved: dict[str, object]) -> str:
        return judge(plan, _outcome({"status": "ok", "timing": [], "profile": {}, "saved": saved}), ref,
                     REFERENCE).reason

    names = ["cand_0_0.out", "cand_0_0_reuse.out", "cand_0_1.out"]
    digests = {n: tensorfile.write(ref["ref_0_0.out"], tmp_path / n) for n in names}
    assert run(dict(digests)) == "correct on every case"
    for n in names:
        tensorfile.write(ref["ref_0_0.out"], tmp_path / n)
    assert "an output file the harness never saved" in run({})
    for n in names:
        tensorfile.write(ref["ref_0_0.out"], tmp_path / n)
    (tmp_path / "cand_0_0.out").unlink()
    assert "the output the harness saved is gone" in run(dict(digests))
    for n in names:
        tensorfile.write([ref["ref_0_0.out"][0] * 1.0000001], tmp_path / n)
    assert "the output file was changed after the harness saved it" in run(dict(digests))


def test_each_shape_set_has_its_own_speedup_and_the_headline_is_their_geometric_mean() -> None:
    # One set 4x faster, the other 4x slower: pooled into one median the pairs could read anything between; per
    # set, one is a regression (at the policy's threshold) and the headline, their geometric mean, is 1.
    result = EvalResult(verdict="pass", reason="", target="cpu")
    fast = {"shape": 0, "baseline_ms": [4.0 + 0.01 * (i % 7) for i in range(60)],
            "candidate_ms": [1.0 + 0.005 * (i % 5) for i in range(60)]}
    slow = {"shape": 1, "baseline_ms": [1.0 + 0.005 * (i % 5) for i in range(60)],
            "candidate_ms": [4.0 + 0.01 * (i % 7) for i in range(60)]}
    _attach_timing(result, [fast, slow], EvalSettings(regression_threshold=0.05), [{"n": 256}, {"n": 16}])
    assert [(p.shape_set, p.shape, p.status) for p in result.per_shape] == [(0, {"n": 256}, "improved"),
                                                                          (1, {"n": 16}, "regression")]
    assert result.speedup == pytest.approx(1.0, rel=0.02)
    low, high = result.speedup_ci
    assert low < 1.0 < high and high / low < 1.1  # the sets' intervals combined, then the floor once
    assert result.details["speedup_definition"].startswith("speedup = the geometric mean")
    assert not result.faster and [p.shape_set for p in result.regressions] == [1]
