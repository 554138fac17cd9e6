"""The ncu collector end to end on CPU: a stand-in `ncu` (KFORGE_NCU, tests/fakes/ncu.py) that runs the profiled
program as the real one does, inside the workers' sandbox, then prints output recorded from ncu on an H200."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from fakes.ncu import fake_ncu, printing_the_recording

from kforge_bot.counters import ncu
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"
SETTINGS = EvalSettings(seeds=1, measure=False, profile=False, timeout_s=60)


@pytest.fixture()
def on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # The collector profiles CUDA targets only; the plumbing under test is the same on CPU.
    monkeypatch.setattr(ncu, "unavailable", lambda target: None)


def _collect(tmp_path: Path, candidate: str = "honest.py") -> dict:
    spec = load_spec(ADV / "problem.py")
    return ncu.collect(spec, Implementation.from_file(ADV / candidate, "ModelNew"), "cpu", tmp_path / "report",
                       "baseline", settings=SETTINGS, timeout_s=60)


def test_counters_are_parsed_and_the_raw_file_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_cpu) -> None:
    fake = printing_the_recording(tmp_path / "tool")
    monkeypatch.setenv("KFORGE_NCU", str(fake))
    before = set(Path(tempfile.gettempdir()).glob("kforge-ncu-*"))
    got = _collect(tmp_path)
    assert got["available"] is True, got
    assert len(got["kernels"]) == 2 and "scale" in {k["kernel"] for k in got["kernels"]}
    assert got["summary"]["dominant"] == max(got["kernels"], key=lambda k: k["duration_us"])["kernel"]
    assert (tmp_path / "report" / "baseline.csv").read_text().count('"ID"') == 1
    assert set(Path(tempfile.gettempdir()).glob("kforge-ncu-*")) == before  # its scratch is gone
    assert ncu.consistent_with_timing(got, 0.001) is None  # ~ the recorded kernels' time: consistent
    assert "read these counters with care" in ncu.consistent_with_timing(got, 10.0)


def test_the_profiled_programs_own_prints_never_reach_ncus_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  on_cpu) -> None:
    fake = fake_ncu(tmp_path / "tool", "print('ncu-done')")
    monkeypatch.setenv("KFORGE_NCU", str(fake))
    noisy = tmp_path / "noisy.py"
    noisy.write_text((ADV / "honest.py").read_text() + "\nprint('\"ID\",\"Kernel Name\"')\nprint('forged')\n")
    spec = load_spec(ADV / "problem.py")
    got = ncu.collect(spec, Implementation.from_file(noisy, "ModelNew"), "cpu", tmp_path / "report", "cand",
                      settings=SETTINGS, timeout_s=60)
    text = (tmp_path / "report" / "cand.csv").read_text()
    assert "ncu-done" in text and "forged" not in text
    assert got["available"] is False and "CSV" in got["reason"], got


def test_counters_not_permitted_say_so_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_cpu) -> None:
    fake = fake_ncu(tmp_path / "tool", "print('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to "
                                        "access NVIDIA GPU Performance Counters on the target device 0.')")
    monkeypatch.setenv("KFORGE_NCU", str(fake))
    got = _collect(tmp_path)
    assert got["available"] is False
    assert "ERR_NVGPUCTRPERM" in got["reason"] and "NVreg_RestrictProfilingToAdminUsers" in got["reason"]
    assert "\n" not in got["reason"]


def test_a_call_that_fails_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_cpu) -> None:
    fake = printing_the_recording(tmp_path / "tool")
    monkeypatch.setenv("KFORGE_NCU", str(fake))
    got = _collect(tmp_path, "runtime_error.py")
    assert got["available"] is False and got["reason"].startswith("the profiled call failed:"), got


def test_a_hung_ncu_is_ended_at_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_cpu) -> None:
    fake = fake_ncu(tmp_path / "tool", "", before="time.sleep(600)")
    monkeypatch.setenv("KFORGE_NCU", str(fake))
    spec = load_spec(ADV / "problem.py")
    got = ncu.collect(spec, Implementation.from_file(ADV / "honest.py", "ModelNew"), "cpu", tmp_path / "report",
                      "baseline", settings=SETTINGS, timeout_s=1)  # it never finishes: any limit shows the ending
    assert got == {"available": False, "reason": "ncu did not finish within 1 s", "wall_s": got["wall_s"]}
    assert got["wall_s"] < 30


def test_without_ncu_or_off_cuda_the_reason_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KFORGE_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "not on PATH" in ncu.unavailable("cuda")
    assert "CUDA targets only" in ncu.unavailable("cpu")
    assert ncu.collect(load_spec(ADV / "problem.py"), Implementation.from_file(ADV / "honest.py", "ModelNew"), "cuda",
                       tmp_path, "x")["available"] is False


def test_the_command_profiles_only_the_marked_call_with_the_fixed_metric_set(tmp_path: Path) -> None:
    tool = ncu.NcuTool(path="/opt/ncu/ncu", folders=(Path("/opt/ncu"),))
    argv = ncu.command(tool, tmp_path / "r.json", tmp_path / "x.ncu-rep")
    assert argv[:3] == ["/opt/ncu/ncu", "--clock-control", "none"]
    assert argv[argv.index("--nvtx-include") + 1] == "kforge_call/"
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" in argv[argv.index("--metrics") + 1]
    assert argv[argv.index("--export") + 1].endswith("x.ncu-rep")
    assert argv[-1] == str(tmp_path / "r.json") and os.path.basename(argv[-4]).startswith("python")
