"""Evidence rendering: claims follow the data, missing data says n/a, limits are respected."""

from __future__ import annotations

import json
import re

from fakes.markdown import assert_nothing_live

from kforge_bot.prbot import evidence
from kforge_bot.prbot.evidence import KernelEvidence, TargetRow, WorkloadRow


def _rows():
    return (
        TargetRow("b200", ("self-hosted", "b200"), baseline_ms=0.412, candidate_ms=0.229, speedup=1.80, ci_low=1.78,
                  ci_high=1.82, roofline_before=0.71, roofline_after=0.93, roofline_bound="DRAM bandwidth",
                  correct=True, target_kind="cuda"),
        TargetRow("arc-b580", ("self-hosted", "arc-b580"), baseline_ms=1.31, candidate_ms=1.01, speedup=1.30,
                  ci_low=1.27, ci_high=1.33, correct=True, target_kind="xpu"),
    )


def _outcome(**kw) -> KernelEvidence:
    base = dict(
        kernel="rmsnorm", file="kernels/rmsnorm.py", targets=_rows(),
        correctness={"ok": True, "seeds": [0, 1, 2], "shape_sets": ["small", "large"], "max_abs_error": 0.00123,
                     "max_rel_norm_error": 2.5e-4, "tolerance": {"atol": 0.01, "rtol": 0.01},
                     "checks": ["inputs unchanged", "no aliasing", "timed outputs"], "records": [{"huge": 1}]},
        profile_before="rmsnorm_fwd  412.0 us  DRAM 71%", profile_after="rmsnorm_fused  229.0 us  DRAM 93%",
        analyst_note="Memory bound; @alice suggested wider loads.",
        how_found={"model": "kforge-test-model", "endpoint": "https://user:sk-secret@llm.example/v1",
                   "iterations": 6, "tokens": 48211, "wall_s": 812.4,
                   "steps": ["vectorized loads (2x fewer transactions)", "two rows per program"],
                   "rejected": {"compile_error": 2, "incorrect": 1, "slower": 3}},
        diff="--- a/kernels/rmsnorm.py\n+++ b/kernels/rmsnorm.py\n-BLOCK = 128\n+BLOCK = 512\n",
        branch="kforge/pr-123/rmsnorm", pr_url="https://github.example/o/r/pull/456", pr_number=456)
    base.update(kw)
    return KernelEvidence(**base)


def test_formatting():
    row = _rows()[0]
    assert evidence.fmt_speedup(row) == "1.80x (1.78-1.82)"
    assert evidence.fmt_roofline(row) == "71% -> 93% of DRAM bandwidth"
    assert evidence.fmt_roofline(_rows()[1]) == "n/a"
    assert evidence.fmt_speedup(TargetRow("x", speedup=1.2)) == "1.20x (interval n/a)"
    assert evidence.fmt_roofline(TargetRow("x", roofline_after=0.5)) == "n/a -> 50%"


def test_title():
    assert evidence.render_title(_outcome()) == "kforge: rmsnorm 1.80x faster on b200, 1.30x on arc-b580"
    assert evidence.render_title(_outcome(targets=())) == "kforge: new rmsnorm candidate (not timed)"


def test_pr_body_layout():
    body = evidence.render_pr_body(_outcome(), pr_number=123, head_branch="feature/rmsnorm", harness="1")
    first = body.split("\n\n")[0]
    assert first.startswith("kforge-bot found a faster `rmsnorm` for #123 (`kernels/rmsnorm.py`).")
    assert "correct on every target measured (b200, arc-b580)" in first and "faster on each" in first
    assert "Merge this PR into `feature/rmsnorm`" in first
    assert "| b200 (`[self-hosted, b200]`) | 412 us | 229 us | 1.80x (1.78-1.82) | 71% -> 93% of DRAM bandwidth |" in body
    assert "| arc-b580 (`[self-hosted, arc-b580]`) | 1.31 ms | 1.01 ms | 1.30x (1.27-1.33) | n/a |" in body
    summaries = re.findall(r"<details><summary>(.*?)</summary>", body)
    assert summaries == ["Correctness", "Profile: before and after", "How it was found", "Reproduce", "Diff"]
    assert body.count("<details>") == 5
    _assert_well_formed(body)
    assert "- Seeds: 0, 1, 2" in body and "- Largest absolute error: 0.00123" in body
    assert "- Tolerance: atol=0.01, rtol=0.01" in body and "huge" not in body  # raw records left out
    assert "kforge-bot check kernels/rmsnorm.py --candidate candidate_rmsnorm.py --target cuda" in body
    assert "git fetch origin kforge/pr-123/rmsnorm" in body
    assert "/kforge retry" in body and "/kforge stop" in body
    assert body.rstrip().endswith("<!-- kforge-bot: pr=123 kernel=rmsnorm targets=b200,arc-b580 harness=1 -->")


def test_model_text_cannot_ping_or_leak():
    body = evidence.render_pr_body(_outcome(), pr_number=1, head_branch="f")
    assert_nothing_live(body, "@alice")  # a model's text is shown in a code span: it pings nobody
    assert "@alice suggested wider loads" in body
    assert "sk-secret" not in body


def test_the_follow_up_names_nothing_of_the_runner():
    """Attack (issue 28, class 9): the follow-up PR printed the LLM endpoint's URL (an internal host would go public)
    and the runner's temp path of the trajectory. It links the workflow run's artifacts instead."""
    how = {**_outcome().how_found, "endpoint": "http://10.0.0.7:8000/v1", "trajectory": "/runner/_temp/kforge/rmsnorm-x"}
    run = "https://github.example/o/r/actions/runs/77"
    body = evidence.render_pr_body(_outcome(how_found=how), pr_number=1, head_branch="f", run_url=run)
    assert "10.0.0.7" not in body and "llm.example" not in body and "/runner/_temp" not in body
    assert f"artifacts of [this workflow run]({run})" in body


def test_text_a_pull_request_wrote_renders_no_markdown():
    """Attack (issue 28, class 9): a reason quoting what a PR wrote (an `entry:` value in an error) rendered as live
    Markdown (an image, a link, a mention, HTML) in the comment, the summary and the follow-up PR."""
    hostile = "kernels.k.entry: expected a Python identifier, got '![x](https://evil.example/t.png) @maintainers <img src=x>'"
    outcome = _outcome(pr_url=None, pr_number=None, skip_reason=hostile,
                       correctness={"ok": False, "reason": hostile}, analyst_note=hostile,
                       how_found={"steps": [hostile], "rejected": [hostile], hostile: hostile})
    for text in (evidence.render_comment([outcome], pr_number=1, note=hostile), evidence.render_summary([outcome]),
                 evidence.render_pr_body(outcome, pr_number=1, head_branch="f")):
        assert "![x](https://evil.example/t.png)" in text  # shown, as text
        assert_nothing_live(text, "![x]", "](https://evil", "@maintainers", "<img")


def test_claims_follow_the_data():
    mixed = _outcome(targets=(_rows()[0], TargetRow("arc-b580", speedup=1.01, ci_low=0.98, ci_high=1.04, correct=True)))
    first = evidence.render_pr_body(mixed, pr_number=1, head_branch="f").split("\n\n")[0]
    assert "It is faster on b200; not measurably faster on arc-b580" in first
    assert "faster on each" not in first

    unknown = _outcome(targets=(TargetRow("b200", speedup=1.5, ci_low=1.4, ci_high=1.6),))
    first = evidence.render_pr_body(unknown, pr_number=1, head_branch="f").split("\n\n")[0]
    assert "Correctness was not recorded on b200" in first and "correct on every" not in first

    none_faster = _outcome(targets=(TargetRow("b200", speedup=1.02, correct=True),))
    first = evidence.render_pr_body(none_faster, pr_number=1, head_branch="f").split("\n\n")[0]
    assert first.startswith("kforge-bot found a candidate") and "not measurably faster on b200" in first


def test_missing_data_is_na_not_invented():
    bare = KernelEvidence(kernel="gelu", file="k/gelu.py", targets=(TargetRow("cpu"),))
    body = evidence.render_pr_body(bare, pr_number=9, head_branch="f")
    assert "| cpu | n/a | n/a | n/a | n/a |" in body
    assert "No correctness record was attached to this result (n/a)." in body
    assert "No record of the search was attached (n/a)." in body
    assert "**Before (baseline)**\n\nn/a" in body
    assert "<summary>Diff</summary>" not in body
    assert not re.search(r"\d+\.\d\dx", body)  # no speedup figure anywhere


def test_body_respects_githubs_limit():
    huge_diff = "".join(f"+line {i} " + "x" * 80 + "\n" for i in range(2000))
    huge_profile = "kernel " * 20000
    o = _outcome(diff=huge_diff, profile_before=huge_profile, profile_after=huge_profile)
    body = evidence.render_pr_body(o, pr_number=1, head_branch="f")
    assert len(body) <= 65536
    assert "(diff cut:" in body and "(profile cut:" in body
    assert body.rstrip().endswith("-->") and "<summary>Reproduce</summary>" in body
    _assert_well_formed(body)


def _assert_well_formed(body: str) -> None:
    """Every code fence closes, and no <details> tag or marker sits inside one."""
    fence = None
    for line in body.splitlines():
        m = re.match(r"^(`{3,})", line)
        if m and fence is None:
            fence = m.group(1)
        elif m and fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            continue
        else:
            assert not line.startswith(("</details>", "<details>", "<!-- kforge-bot")), line
    assert fence is None, "an unclosed code fence"
    assert body.count("<details>") == body.count("</details>")


def test_fences_survive_backticks_in_code():
    diff = "+x = '```'\n+y = '````'\n"
    body = evidence.render_pr_body(_outcome(diff=diff), pr_number=1, head_branch="f")
    block = body[body.index("<summary>Diff</summary>"):]
    assert "`````diff\n" in block and "\n`````\n" in block
    _assert_well_formed(body)


def test_comment_one_line_per_kernel_and_marker():
    no_gain = KernelEvidence("softmax", "kernels/softmax.py",
                            (TargetRow("b200", speedup=0.98, ci_low=0.96, ci_high=1.00, correct=True),),
                            skip_reason="no improvement over the baseline")
    not_run = KernelEvidence("gelu", "kernels/gelu.py", skip_reason="skipped by policy (not a required kernel)")
    text = evidence.render_comment([_outcome(), no_gain, not_run], pr_number=123)
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert lines == [
        "- `rmsnorm` (`kernels/rmsnorm.py`): 1.80x on b200 (1.78-1.82), 1.30x on arc-b580 (1.27-1.33) -> "
        "[#456](https://github.example/o/r/pull/456)",
        "- `softmax` (`kernels/softmax.py`): no follow-up PR: no improvement over the baseline "
        "(measured: 0.98x on b200 (0.96-1.00))",
        "- `gelu` (`kernels/gelu.py`): no follow-up PR: skipped by policy (not a required kernel)",
    ]
    assert text.rstrip().endswith(evidence.comment_marker(123))


def test_comment_for_a_run_that_did_not_happen():
    text = evidence.render_comment([], pr_number=5, note="not run: fork PR without the 'kforge:run' label")
    assert text.startswith("**kforge-bot**: not run: fork PR without the 'kforge:run' label")
    assert "<!-- kforge-bot:summary pr=5 -->" in text


def test_summary_and_status():
    no_gain = KernelEvidence("softmax", "kernels/softmax.py", skip_reason="no improvement")
    summary = evidence.render_summary([_outcome(), no_gain], note="trusted: same-repository PR by @ada")
    assert "| `rmsnorm` | b200 (`[self-hosted, b200]`) | 412 us | 229 us | 1.80x (1.78-1.82) |" in summary
    assert "| `softmax` | n/a | n/a | n/a | n/a | n/a | no PR: no improvement |" in summary
    assert_nothing_live(summary, "@ada")
    assert "@ada" in summary
    assert evidence.status_description([_outcome(), no_gain]) == "2 kernels: 1 follow-up PR (#456), 1 without"
    assert evidence.status_description([], note="x" * 300).endswith("…")
    assert len(evidence.status_description([], note="x" * 300)) == 140


def test_round_trip_through_json():
    o = _outcome()
    again = KernelEvidence.from_dict(json.loads(json.dumps(o.to_dict())))
    assert again == KernelEvidence(**{**o.__dict__, "correctness": dict(o.correctness), "how_found": dict(o.how_found)})
    assert again.targets[0].runner_labels == ("self-hosted", "b200")


def test_markers_cannot_be_broken_by_names():
    marker = evidence.pr_marker(1, "evil --> <b>", ["b200"])
    assert marker.count("-->") == 1 and "<b>" not in marker


def test_the_pr_body_shows_the_counters_before_and_after_table_and_its_reading() -> None:
    from pathlib import Path

    from kforge_bot.optimize.counters import section
    from kforge_bot.counters.ncu_parse import parse_raw, summary
    from kforge_bot.prbot.evidence import render_pr_body, render_profile

    rows = parse_raw((Path(__file__).parents[1] / "data" / "ncu" / "raw_h200_scale_softmax.csv").read_text())
    counters = {"available": True, "kernels": rows, "summary": summary(rows)}
    outcome = KernelEvidence(kernel="softmax", file="softmax.py", counters=section(counters, counters))
    body = render_pr_body(outcome, pr_number=7, head_branch="feature")
    profile = body[body.index("Profile: before and after"):]
    assert "**Hardware counters (Nsight Compute), before and after**" in profile
    assert "| before | scale |" in profile and "| after | scale |" in profile
    assert "The kernel as written spends" in profile and "The best candidate spends" in profile
    missing = KernelEvidence(kernel="softmax", file="softmax.py",
                            counters=section(None, None, "ncu (Nsight Compute) is not on PATH"))
    assert "Hardware counters were not collected: ncu (Nsight Compute) is not on PATH." in render_profile(missing)


def test_a_backward_kernels_evidence_gives_each_direction_and_round_trips() -> None:
    from kforge_bot.prbot.outcomes import target_row
    from kforge_bot.evaluate.wire.result import EvalResult

    result = EvalResult(verdict="pass", reason="", target="cuda", speedup=1.3, speedup_ci=(1.2, 1.4), details={
        "directions": {"forward": {"speedup": 1.1, "speedup_ci": [1.05, 1.15]},
                       "backward": {"speedup": 1.5, "speedup_ci": [1.4, 1.6]},
                       "forward+backward": {"speedup": 1.3, "speedup_ci": [1.2, 1.4]}}})
    row = target_row(result, "h200", kind="cuda")
    table = evidence.render_table([row])
    assert "By direction (the speedup above is forward+backward):" in table
    assert "| 1.10x (1.05-1.15) | 1.50x (1.40-1.60) | 1.30x (1.20-1.40) |" in table
    outcome = KernelEvidence(kernel="rms_norm", file="ops/rms_norm.py", targets=(row,))
    again = KernelEvidence.from_dict(json.loads(json.dumps(outcome.to_dict())))
    assert again.targets[0].directions == row.directions
    plain = evidence.render_table([target_row(EvalResult(verdict="pass", reason="", target="cuda", speedup=1.3,
                                                         speedup_ci=(1.2, 1.4)), "h200", kind="cuda")])
    assert "By direction" not in plain


def test_the_pr_body_says_which_baseline_each_figure_is_against():
    from dataclasses import replace

    from kforge_bot.prbot.outcomes import target_row
    from kforge_bot.evaluate.wire.result import EvalResult

    result = EvalResult(verdict="pass", reason="", target="cuda", speedup=2.0, speedup_ci=(1.9, 2.1), details={
        "baselines": {"eager": {"speedup": 2.0}, "compile": {"mode": "default", "against": {
            "speedup": 1.25, "speedup_ci": [1.1, 1.4]}}, "best": {"speedup": 1.25, "speedup_ci": [1.1, 1.4],
                                                               "baselines": ["eager", "compile"]}}})
    row = target_row(result, "h200", kind="cuda")
    assert row.baselines == (("torch.compile (default)", 1.25, 1.1, 1.4),
                             ("the faster of eager and compile (the KForge paper's metric)", 1.25, 1.1, 1.4))
    outcome = _outcome(targets=(replace(_rows()[0], baselines=row.baselines),))
    body = evidence.render_pr_body(outcome, pr_number=1, head_branch="f")
    assert "The speedups in the table are against eager (the kernel as written" in body
    assert "- b200: 1.25x (1.10-1.40) against torch.compile (default)" in body
    assert KernelEvidence.from_dict(json.loads(json.dumps(outcome.to_dict()))) == outcome
    # without other baselines the body is as before
    assert "against eager" not in evidence.render_pr_body(_outcome(), pr_number=1, head_branch="f")


def test_the_workloads_sit_beside_the_kernel_and_their_text_renders_nothing_live():
    row = TargetRow("cpu", (), 2.0, 1.0, 2.0, 1.9, 2.1, correct=True, target_kind="cpu")
    workloads = (WorkloadRow("decode", "cpu", "improved", unit="tokens/s", before=800.0, after=860.0, speedup=1.075,
                             ci_low=1.06, ci_high=1.09, pairs=14, threshold=0.05),
                 WorkloadRow("prefill", "cpu", "error", reason="the head failed: @maintainers ![x](https://evil/x)",
                             unit="ms/step", pairs=0))
    outcome = KernelEvidence(kernel="rmsnorm", file="kernels/rmsnorm.py", targets=(row,), workloads=workloads)
    body = evidence.render_pr_body(outcome, pr_number=3, head_branch="feature")
    assert body.index("| target | before | after |") < body.index("| workload | target | before | after |")
    assert "| `decode` | cpu | 800 tokens/s | 860 tokens/s | 1.075x (1.060-1.090) | 14 | improved |" in body
    assert "End to end: `decode` faster; `prefill` not measurably faster with it" in body
    assert_nothing_live(body, "@maintainers", "![x]", "](https://evil")
    line = evidence.render_comment_line(outcome)
    assert "end to end `decode` 1.075x (1.060-1.090)" in line
    assert KernelEvidence.from_dict(json.loads(json.dumps(outcome.to_dict()))) == outcome
