"""The results document: aggregating the per-target jobs' results into one decision per kernel, and reading
them from a folder of artifacts."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from kforge_bot.prbot import results
from kforge_bot.prbot.evidence import KernelEvidence, TargetRow, WorkloadRow
from kforge_bot.prbot.outcomes import KernelOutcome
from kforge_bot.errors import KforgeError


def _doc(target: str, source: str | None, speedup: float, low: float, high: float, correct: bool = True) -> dict:
    row = TargetRow(target, (), 2.0, 2.0 / speedup, speedup, low, high, correct=correct, target_kind="cuda")
    run = KernelOutcome(id="mm", evidence=KernelEvidence(kernel="mm", file="kernels/mm.py", targets=(row,)),
                          target=target, kind="cuda", candidate=source, qualifies=low >= 1.05 and correct)
    return {"schema": results.SCHEMA, "pr": 1, "kernels": [run.to_dict()]}


def test_aggregate_needs_one_candidate_good_everywhere():
    same = [_doc("b200", "A", 1.8, 1.7, 1.9), _doc("arc-b580", "A", 1.2, 1.1, 1.3)]
    [run] = results.aggregate(same, ("b200", "arc-b580"), 1.05)
    assert run.qualifies and [r.target for r in run.evidence.targets] == ["arc-b580", "b200"]

    slower = [_doc("b200", "A", 1.8, 1.7, 1.9), _doc("arc-b580", "A", 0.9, 0.85, 0.95)]
    [run] = results.aggregate(slower, (), 1.05)
    assert not run.qualifies and "not faster on arc-b580" in run.evidence.skip_reason

    wrong = [_doc("b200", "A", 1.8, 1.7, 1.9), _doc("arc-b580", "A", 1.5, 1.4, 1.6, correct=False)]
    [run] = results.aggregate(wrong, (), 1.05)
    assert not run.qualifies and "not correct on arc-b580" in run.evidence.skip_reason

    different = [_doc("b200", "A", 1.8, 1.7, 1.9), _doc("arc-b580", "B", 1.5, 1.4, 1.6)]
    [run] = results.aggregate(different, ("b200", "arc-b580"), 1.05)
    assert not run.qualifies and "was not measured on arc-b580" in run.evidence.skip_reason

    missing_required = [_doc("b200", "A", 1.8, 1.7, 1.9)]
    [run] = results.aggregate(missing_required, ("b200", "h200"), 1.05)
    assert not run.qualifies and "not measured on h200" in run.evidence.skip_reason


def test_load_results_dir_errors(tmp_path):
    with pytest.raises(KforgeError, match="no results files"):
        results.load_results_dir(tmp_path)
    (tmp_path / "x.json").write_text('{"schema": "other"}')
    with pytest.raises(KforgeError, match="not a kforge-bot pr results file"):
        results.load_results_dir(tmp_path)


def test_a_pr_that_changed_the_kernels_test_qualifies_on_no_target():
    """Issue 28, class 2: a per-target job that found the PR's change to the kernel's test unapproved (spec-changed)
    blocks the follow-up PR even where another job's candidate would qualify."""
    from kforge_bot.prbot.outcomes import with_spec_note

    good = _doc("b200", "A", 1.8, 1.7, 1.9)
    blocked = KernelOutcome.from_dict(_doc("arc-b580", "A", 1.5, 1.4, 1.6)["kernels"][0])
    blocked = with_spec_note(blocked, "spec-changed: the PR edits this kernel's tolerance", True)
    assert not blocked.qualifies and blocked.evidence.skip_reason.startswith("spec-changed: ")
    [run] = results.aggregate([good, {"schema": results.SCHEMA, "pr": 1, "kernels": [blocked.to_dict()]}], (), 1.05)
    assert not run.qualifies and run.candidate is None
    assert run.evidence.skip_reason.startswith("spec-changed: the PR edits this kernel's tolerance")
    fresh = KernelOutcome.from_dict(_doc("arc-b580", "A", 1.5, 1.4, 1.6)["kernels"][0])
    approved = with_spec_note(fresh, "approved with the label", False)
    assert approved.qualifies and approved.evidence.skip_reason is None and approved.evidence.spec_note



def _with_workload(doc: dict, name: str, verdict: str, speedup: float, low: float, high: float) -> dict:
    row = WorkloadRow(name, doc["kernels"][0]["target"], verdict, unit="ms/step", before=10.0, after=10.0 / speedup,
                      speedup=speedup, ci_low=low, ci_high=high, pairs=12, threshold=0.02)
    doc["kernels"][0]["outcome"]["workloads"].append(asdict(row))
    return doc


def test_aggregate_holds_a_candidate_to_its_workloads_on_every_target():
    def docs(b200: tuple[str, float, float, float], arc: tuple[str, float, float, float]) -> list[dict]:
        return [_with_workload(_doc("b200", "A", 1.8, 1.7, 1.9), "decode", *b200),
                _with_workload(_doc("arc-b580", "A", 1.2, 1.1, 1.3), "decode", *arc)]

    gains = docs(("improved", 1.03, 1.02, 1.04), ("pass", 1.004, 1.001, 1.007))
    [run] = results.aggregate(gains, (), 1.05, require_workload_gain=True)
    assert run.qualifies and {w.target for w in run.evidence.workloads} == {"b200", "arc-b580"}

    flat_on_one = docs(("improved", 1.03, 1.02, 1.04), ("pass", 1.0, 0.99, 1.01))
    [run] = results.aggregate(flat_on_one, (), 1.05)
    assert run.qualifies  # shown, not required
    [run] = results.aggregate(flat_on_one, (), 1.05, require_workload_gain=True)
    assert not run.qualifies and "workload decode is not faster end to end with it on arc-b580" in \
        run.evidence.skip_reason

    other_tokens = docs(("improved", 1.03, 1.02, 1.04), ("incorrect", 1.0, 0.99, 1.01))
    [run] = results.aggregate(other_tokens, (), 1.05)
    assert not run.qualifies and "changes the output of workload decode" in run.evidence.skip_reason
