"""The gate's report: per-kernel entries as JSON and back (the result cache stores them), the run's counts,
its exit code and the required targets it could not measure."""

from __future__ import annotations

import json

from kforge_bot import HARNESS_VERSION, __version__
from kforge_bot.gate.report import GateReport, KernelReport


def _report(*kernels: KernelReport, strict: bool = False) -> GateReport:
    return GateReport(repo="/r", base_ref="main", head_ref="HEAD", base_sha="a" * 40, head_sha="b" * 40,
                      merge_base="c" * 40, kernels=list(kernels), unchanged=["x"], required_targets=["cuda"],
                      require_all_targets=strict)


def test_a_kernel_entry_round_trips_and_writes_its_change_and_threshold() -> None:
    entry = KernelReport("slow", "slow", "slow.py", "manifest", "regression", "slower", target="cpu",
                         base_ms=0.1, head_ms=0.2, speedup=0.5, speedup_ci=[0.48, 0.52], threshold=0.05,
                         required={"cuda": "skipped (needs cuda)"})
    data = json.loads(json.dumps(entry.to_dict()))
    assert data["change"] == "2.0x slower (1.9x-2.1x)" and data["threshold_text"] == "5% (cpu)"
    assert KernelReport.from_dict(data) == entry  # the derived texts are not read back
    assert entry.unmeasured_required == ["cuda"]


def test_counts_exit_code_and_unmeasured_required_targets() -> None:
    ok = KernelReport("ok", "ok", "ok.py", "manifest", "pass", "within", required={"cuda": "measured"})
    skipped = KernelReport("gpu", "gpu", "gpu.py", "manifest", "skipped", "no cuda here",
                           required={"cuda": "skipped (needs cuda)"})
    report = _report(ok, skipped)
    assert report.counts() == {"pass": 1, "improved": 0, "regression": 0, "incorrect": 0, "error": 0,
                               "spec-changed": 0, "inconclusive": 0, "skipped": 1}
    assert report.unmeasured_required() == {"cuda": ["gpu"]}
    assert report.exit_code == 0  # reported, not failing, without require_all_targets
    assert _report(ok, skipped, strict=True).exit_code == 1
    failing = KernelReport("w", "w", "w.py", "manifest", "incorrect", "differs")
    assert _report(ok, failing).exit_code == 1


def test_the_json_document_names_versions_revisions_and_the_required_targets() -> None:
    skipped = KernelReport("gpu", "gpu", "gpu.py", "manifest", "skipped", "no cuda here",
                           required={"cuda": "skipped (needs cuda)"})
    data = json.loads(json.dumps(_report(skipped, strict=True).to_dict()))
    assert data["kforge_bot"] == __version__ and data["harness_version"] == HARNESS_VERSION
    assert data["base"] == {"ref": "main", "sha": "a" * 40, "merge_base": "c" * 40}
    assert data["head"] == {"ref": "HEAD", "sha": "b" * 40}
    assert data["required_targets"] == {"targets": ["cuda"], "require_all_targets": True,
                                        "unmeasured": {"cuda": ["gpu"]}, "fails": True}
    assert data["exit_code"] == 1 and data["unchanged"] == ["x"] and data["kernels"][0]["id"] == "gpu"
