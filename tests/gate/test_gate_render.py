"""kforge_bot.gate.render: a gate report's annotations, commit status and step summary Markdown (whole runs through
the CLI are in tests/gate/test_gate_run.py)."""

from __future__ import annotations

from kforge_bot.gate.render import annotation_lines, render_markdown, status_for
from kforge_bot.gate.report import GateReport, KernelReport


def sample_report() -> GateReport:
    kernels = [
        KernelReport("slow", "slow", "kernels/slow,v2.py", "manifest", "regression", "slower: 100% more\nsee log",
                     base_ms=0.1, head_ms=0.2, speedup=0.5, speedup_ci=[0.48, 0.52], target="cpu", threshold=0.05),
        KernelReport("ok", "ok", "ok.py", "manifest", "pass", "within", base_ms=0.1, head_ms=0.1, speedup=1.0,
                     speedup_ci=[0.99, 1.01], cached=True, target="cpu", threshold=0.05),
    ]
    return GateReport(repo="/r", base_ref="main", head_ref="HEAD", base_sha="a" * 40, head_sha="b" * 40,
                      merge_base="a" * 40, kernels=kernels, unchanged=["x", "y"])


def test_annotations_escape_workflow_command_syntax():
    lines = annotation_lines(sample_report())
    assert len(lines) == 1  # only failing kernels
    assert lines[0].startswith("::error file=kernels/slow%2Cv2.py,title=kforge gate%3A slow regression::")
    assert "%0A" in lines[0] and "\n" not in lines[0]
    nested = sample_report()
    nested.repo = "/work/space/sub"
    assert annotation_lines(nested, "/work/space")[0].startswith("::error file=sub/kernels/slow%2Cv2.py,")
    state, description = status_for(sample_report())
    assert state == "failure" and description == "kforge gate: 1 pass, 1 regression"
    md = render_markdown(sample_report())
    assert "| slow | 100 us | 200 us | 2.0x slower (1.9x-2.1x) | 5% (cpu) | **regression** |" in md
    assert "| kernel | base | head | change (interval) | threshold | verdict | notes |" in md
    assert "cache hit" in md and "2 managed kernel(s) unchanged" in md



def test_a_shape_sets_values_render_nothing_in_the_summary():
    """Red-team pass: with the spec-change label the head's shape sets count, and their values are the head's
    writing (a keyword its own inputs function takes). The summary's per-shape rows printed them as they were: an
    @-mention and an image rendered live. They are quoted now, as the PR comment's per-shape table quotes them."""
    from fakes.markdown import assert_nothing_live

    hostile = "@octo-org ![i](https://evil.example/x.png)"
    report = sample_report()
    report.kernels[0].shapes = [{"shape_set": 0, "shape": {"n": 16, "tag": hostile}, "status": "regression"},
                                {"shape_set": 1, "shape": {"n": 32}, "status": "pass"}]
    md = render_markdown(report)
    assert "shape set 1 (n=32)" in md
    assert_nothing_live(md, "@octo-org", "![i]", hostile)
