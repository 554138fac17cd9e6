"""report.md and plot.png are functions of the trajectory: what was measured, nothing filled in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kforge_bot.hardware import Ceilings
from kforge_bot.optimize.report import render_markdown, write_report
from kforge_bot.optimize.trajectory import Trajectory

from test_trajectory import result


def llm_run(tmp_path: Path, *, improved: bool, flops: float | None = None, ceilings: bool = True) -> Trajectory:
    t = Trajectory.create(tmp_path)
    t.append("start", schema=1, kernel="tiny_mm", kernel_file="tiny_mm.py", entry="mm_bias_relu", language="c",
             mode="llm", target="cpu", endpoint="m at http://127.0.0.1:1/v1",
             endpoint_url="http://127.0.0.1:1/v1", model="m",
             baseline_file="candidates/baseline.py", baseline_sha256="x", budgets={"iterations": 4, "tokens": 9000},
             settings={"seeds": 2, "timing_budget_s": 0.5, "confidence": 0.95})
    t.append("session", resumed=False)
    t.append("baseline", result=result(speedup=1.0, ci=(0.98, 1.02), base_ms=5.0, cand_ms=5.0), eval_s=6.0)
    t.append("workload", shape_sets=[{"bytes": 8_000_000, "flops": flops}], basis="test workload")
    t.append("ceilings", ceilings=Ceilings(100.0, {"fp32": 1.0}, "measured", "doctor on Test CPU").to_dict()
             if ceilings else None, note="doctor" if ceilings else "no ceilings are known for this device")
    t.append("recommendations", for_iteration=0, items=["Raise TILE_N to 64 so the inner loop vectorizes."])
    t.append("reply", iteration=1, agent="generator", text="...", prompt_tokens=1000, completion_tokens=200,
             model="m", usage={"total_tokens": 1200, "prompt_tokens": 1000, "completion_tokens": 200, "retries": 1},
             llm_s=1.5)
    t.append("candidate", iteration=1, file=t.write_source("0001.py", "broken"), sha256="a")
    t.append("result", iteration=1, result=result("compile_error", reason="C compilation failed: error: x undeclared"),
             accepted=False, eval_s=3.0, iteration_s=4.6)
    t.append("malformed", iteration=2, agent="generator", feedback="the reply had no fenced code block",
             iteration_s=1.0)
    t.append("candidate", iteration=3, file=t.write_source("0003.py", "fast"), sha256="b")
    speed = (2.0, (1.8, 2.2)) if improved else (1.01, (0.97, 1.05))
    t.append("result", iteration=3, result=result(speedup=speed[0], ci=speed[1], base_ms=4.0, cand_ms=4.0 / speed[0]),
             accepted=improved, eval_s=5.0, iteration_s=5.2)
    t.append("stop", kind="BudgetExhausted", reason="iteration budget spent (3 of 3)")
    t.append("end", written_to="/tmp/out.py" if improved else None)
    return t


def test_markdown_of_an_improved_run_states_measured_figures(tmp_path: Path) -> None:
    t = llm_run(tmp_path, improved=True)
    text = render_markdown(t.record, plot_file="plot.png", plot_note="speedup per iteration")
    assert "**2.00x faster** than the kernel as written (95% interval 1.800-2.200)" in text
    assert "Written to `/tmp/out.py`" in text and "saved as `best.py`" in text
    assert "| LLM generator and analyst: m at http://127.0.0.1:1/v1 |" in text and "1,200 of 9,000" in text
    assert "| 1 | - | compile_error | - |" in text and "C compilation failed" in text
    assert "| 2 | - | malformed |" in text
    assert "iteration budget spent (3 of 3)" in text
    assert "Raise TILE_N to 64" in text
    # Both sides from the best's interleaved measurement (4 ms and 2 ms), not the first evaluation's 5 ms:
    # 8 MB in 4 ms = 2 GB/s = 2% of 100 GB/s; the best moves it in 2 ms.
    assert "| median time per call | 4.000 ms | 2.000 ms |" in text
    assert "| achieved bandwidth | 2 GB/s | 4 GB/s |" in text
    assert "| fraction of peak bandwidth | 2.0% | 4.0% |" in text
    assert "![speedup per iteration](plot.png)" in text
    assert "waiting for the model" in text


def test_markdown_says_when_nothing_beat_the_kernel_as_written(tmp_path: Path) -> None:
    text = render_markdown(llm_run(tmp_path, improved=False).record, plot_note="matplotlib is not installed")
    assert "**No candidate beat the kernel as written**" in text
    assert "the original file was left untouched" in text
    assert "1.010x (0.970-1.050)" in text and "does not establish a speedup" in text
    assert "Plot skipped: matplotlib is not installed." in text
    assert "| median time per call | 5.000 ms | - |" in text
    assert "faster** than" not in text


def test_plot_png_is_written_with_matplotlib(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    files = write_report(tmp_path, llm_run(tmp_path, improved=True).record)
    assert files.plot is not None and files.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "(plot.png)" in files.markdown.read_text()


def test_plot_draws_a_classic_roofline_when_flops_are_known(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    t = llm_run(tmp_path, improved=True, flops=2e9)
    assert t.record.position("best")["flops_known"] is True
    files = write_report(tmp_path, t.record)
    assert files.plot is not None and files.plot.stat().st_size > 10_000
    assert "fraction of the roofline" in files.markdown.read_text()


def test_without_matplotlib_the_report_says_the_plot_was_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    files = write_report(tmp_path, llm_run(tmp_path, improved=True).record)
    assert files.plot is None and not (tmp_path / "plot.png").exists()
    assert "Plot skipped: matplotlib is not installed" in files.markdown.read_text()


def test_without_ceilings_the_plot_has_no_roofline_panel_and_says_why(tmp_path: Path) -> None:
    """A roofline without its ceilings is no roofline (it was a bar chart of GFLOP/s): the panel is dropped, the
    report says why, and the table still gives the kernel's FLOP rate."""
    pytest.importorskip("matplotlib")
    from kforge_bot.optimize.report import roofline_missing

    record = llm_run(tmp_path, improved=True, flops=2e9, ceilings=False).record
    assert "doctor --save" in (roofline_missing(record) or "")
    files = write_report(tmp_path, record)
    assert files.plot is not None and "no roofline panel (no ceilings known" in files.markdown.read_text()
    assert "| achieved compute | 0.5 TFLOP/s | 1 TFLOP/s |" in render_markdown(record)
