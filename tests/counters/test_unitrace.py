"""The unitrace collector (Intel XPU) end to end on CPU: a stand-in `unitrace` (KFORGE_UNITRACE,
tests/fakes/unitrace.py) runs the profiled program inside the workers' sandbox as the real one would, then writes
a metric-query file in unitrace's format. Nothing here has run on an Intel GPU."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from fakes.unitrace import fake_unitrace

from kforge_bot.counters import ncu, unitrace
from kforge_bot.counters.counter_tools import tool_for
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.optimize import counters
from kforge_bot.kernelspec import Implementation, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"
SETTINGS = EvalSettings(seeds=1, measure=False, profile=False, timeout_s=60)


def _collect(tmp_path: Path, candidate: str = "honest.py", peak_gbs: float | None = 456.0) -> dict:
    spec = load_spec(ADV / "problem.py")
    return unitrace.collect(spec, Implementation.from_file(ADV / candidate, "ModelNew"), "cpu", tmp_path / "report",
                            "baseline", settings=SETTINGS, timeout_s=60, peak_gbs=peak_gbs)


@pytest.fixture()
def on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # The collector profiles XPU targets only; the plumbing under test is the same on CPU.
    monkeypatch.setattr(unitrace, "unavailable", lambda target: None)


def test_the_query_file_is_read_into_the_digest_and_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         on_cpu) -> None:
    monkeypatch.setenv("KFORGE_UNITRACE", str(fake_unitrace(tmp_path / "tool")))
    before = set(Path(tempfile.gettempdir()).glob("kforge-profile-*"))
    got = _collect(tmp_path)
    assert got["available"] is True and got["tool"] == "unitrace", got
    assert [k["kernel"] for k in got["kernels"]][:1] == ["_softmax_kernel"]
    assert got["summary"]["dominant"] == "_matmul_kernel" and got["summary"]["class"] == "compute-bound"
    assert "GpuTime[ns]" in (tmp_path / "report" / "baseline.csv").read_text()  # the raw file, as unitrace wrote it
    # Without a peak given, the device's known one (the B580's runner facts: 456 GB/s) gives the percentages.
    spec = load_spec(ADV / "problem.py")
    named = unitrace.collect(spec, Implementation.from_file(ADV / "honest.py", "ModelNew"), "cpu", tmp_path / "named",
                             "baseline", settings=SETTINGS, timeout_s=60, device_name="Intel(R) Arc(TM) B580 Graphics")
    softmax = next(k for k in named["kernels"] if k["kernel"] == "_softmax_kernel")
    assert softmax["dram_throughput_pct"] == pytest.approx(100 * 134217728 / 400_000 / 456.0)
    assert set(Path(tempfile.gettempdir()).glob("kforge-profile-*")) == before  # the scratch is gone


def test_unitrace_without_a_metric_file_or_a_failing_call_is_said_in_one_line(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             on_cpu) -> None:
    monkeypatch.setenv("KFORGE_UNITRACE", str(fake_unitrace(tmp_path / "tool", write_file=False)))
    got = _collect(tmp_path)
    assert got["available"] is False and "unitrace wrote no metric file" in got["reason"]
    assert "Unable to find metric group" in got["reason"] and "\n" not in got["reason"]
    # A call that raises is the implementation's failure, not the tool's: said as such.
    monkeypatch.setenv("KFORGE_UNITRACE", str(fake_unitrace(tmp_path / "tool2")))
    broken = tmp_path / "broken.py"
    broken.write_text((ADV / "honest.py").read_text() + "\n\nclass ModelNew(ModelNew):\n"
                      "    def forward(self, *args):\n        raise RuntimeError('no kernel today')\n")
    spec = load_spec(ADV / "problem.py")
    failing = unitrace.collect(spec, Implementation.from_file(broken, "ModelNew"), "cpu", tmp_path / "report",
                               "0001", settings=SETTINGS, timeout_s=60)
    assert failing["available"] is False and failing["reason"].startswith("the profiled call failed")
    assert "no kernel today" in failing["reason"]


def test_the_target_picks_the_tool_and_each_says_where_it_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tool_for("xpu") is unitrace and tool_for("xpu:1") is unitrace and tool_for("cuda") is ncu
    assert "Intel GPU (xpu) targets only" in unitrace.unavailable("cuda")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("KFORGE_UNITRACE", raising=False)
    assert "unitrace (Intel PTI) is not on PATH" in unitrace.unavailable("xpu")
    assert counters.tool_title({"tool": "unitrace"}) == "unitrace" and counters.tool_title(None) == "Nsight Compute"
