"""The workload rows' rule (pure) and how a row shows in the gate's report."""

from __future__ import annotations

from kforge_bot.gate.render import render_markdown
from kforge_bot.gate.report import GateReport, KernelReport
from kforge_bot.workloads.gate import WorkloadReport, verdict
from kforge_bot.workloads.measure import WorkloadMeasurement


def measured(ci: tuple[float, float] | None, speedup: float = 1.0, status: str = "ok",
             reason: str = "") -> WorkloadMeasurement:
    return WorkloadMeasurement(status=status, reason=reason, base_ms=[1.0] * 8, head_ms=[1.0] * 8, speedup=speedup,
                               speedup_ci=ci, stop="8 pairs")


def fast_kernel() -> KernelReport:
    return KernelReport("softmax", "softmax", "kernels/softmax.py", "manifest", "improved", "", speedup=1.4,
                        speedup_ci=[1.3, 1.5])


def test_a_slower_workload_beside_a_faster_kernel_says_both_in_one_line() -> None:
    word, reason = verdict(measured((0.2, 0.3), 0.25), 0.05, [fast_kernel()], ["softmax"])
    assert word == "regression" and "\n" not in reason
    assert reason.startswith("the workload is slower end to end by more than 5.0% although kernel softmax is faster "
                             "alone (-28.6%")
    assert "over 8 pairs of samples" in reason


def test_the_rest_of_the_rule() -> None:
    assert verdict(measured((0.99, 1.01)), 0.05, [], [])[0] == "pass"
    assert verdict(measured((1.2, 1.3), 1.25), 0.05, [], [])[0] == "improved"
    word, reason = verdict(measured((0.9, 1.01), 0.95), 0.05, [], [])
    assert word == "pass" and reason.startswith("not resolved at the 5.0% threshold")
    word, reason = verdict(measured(None), 0.05, [], [])
    assert word == "error" and "raise gate.workloads.budget_s" in reason
    assert verdict(measured(None, status="incorrect", reason="tokens differ"), 0.05, [], [])[0] == "incorrect"
    assert verdict(measured(None, status="error", reason="the head failed: x"), 0.05, [], []) == \
        ("error", "the head failed: x")


def test_a_workload_row_fails_the_report_and_shows_as_a_row_of_its_own() -> None:
    report = GateReport("r", "main", "HEAD", "a" * 40, "b" * 40, "a" * 40, kernels=[fast_kernel()])
    assert report.exit_code == 0
    report.workloads.append(WorkloadReport("decode", "kforge.yaml", "regression", "the workload is slower",
                                           target="cpu", unit="tokens/s", threshold=0.05, speedup=0.5,
                                           speedup_ci=[0.4, 0.6], pairs=8, base_rate=100.0, head_rate=50.0,
                                           noise_floor=0.01))
    assert report.exit_code == 1 and report.counts()["regression"] == 1
    text = render_markdown(report)
    row = next(line for line in text.splitlines() if "workload decode" in line)
    assert "**regression**" in row and "100 tokens/s" in row and "50 tokens/s" in row and "2.0x slower" in row
    assert "noise floor 1.00%" in row
    assert report.to_dict()["workloads"][0]["change"].startswith("2.0x slower")


def test_a_heads_workload_manifest_linked_out_of_the_checkout_is_never_read(tmp_path) -> None:
    """Red-team pass: the workloads' scan of the head (its entries are checked, never used) walked every kforge.yaml,
    a committed link too, and read it without a boundary: a link to a manifest outside the checkout (another
    repository on the runner) was read on the host, and its workload names and its path came out in the gate's row.
    Now it is refused unread (the kernels' discovery names the link and stops the head)."""
    from pathlib import Path

    from kforge_bot.workloads.gate import gate_workloads

    outside = Path(tmp_path) / "elsewhere" / "kforge.yaml"
    outside.parent.mkdir()
    outside.write_text("kernels:\n  k: {file: k.py, entry: kernel, inputs: 'r.py:make'}\n"
                       "workloads:\n  canary-outside-workload: {}\n")
    base, head = Path(tmp_path) / "base", Path(tmp_path) / "head"
    base.mkdir()
    (head / "w").mkdir(parents=True)
    (head / "w" / "kforge.yaml").symlink_to(outside)
    rows = gate_workloads(base, head, set(), None, None, [], [], None, measure_them=False)
    said = " ".join(f"{r.name} {r.manifest} {r.reason}" for r in rows)
    assert "canary-outside-workload" not in said and str(outside.parent) not in said, said
