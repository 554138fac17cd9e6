"""`track` on a library's kernel with a backward: each shape set and each direction recorded, with the runner's facts,
on the history ref; the series builder makes a series of each; a kernel that does not load is recorded as such and
fails the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.gate_repos import cli
from fakes.gitrepos import commit_all, git, write
from kforge_bot.history.series import RECORD_PREFIX, build_series, main_line
from kforge_bot.history.store import Store

LIBRARY = Path(__file__).resolve().parents[1] / "data" / "library_repo"


@pytest.mark.slow
def test_directions_and_runner_facts_are_recorded(tmp_path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(LIBRARY, repo)
    git(repo, "init", "-q", "-b", "main")
    write(repo, "policy.yml", "version: 1\nevaluation: {seeds: 1, timing_budget_s: 0.5}\n")
    commit_all(repo, "the library")
    proc = cli("track", "--kernel", "rms_norm_autograd", "--policy", "policy.yml", "--json", "-", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    [record] = json.loads(proc.stdout)["records"]
    [kernel] = record["kernels"]
    assert kernel["status"] == "measured" and kernel["reference_distinct"]
    assert set(kernel["directions"]) >= {"forward", "backward"}
    runner = record["runner"]
    assert {"device", "driver", "torch", "triton", "python", "harness", "kforge_bot", "key"} <= set(runner)

    series = build_series(Store(repo).read(), main_line(repo))
    parts = {s.part for s in series}
    assert {"forward (all shape sets)", "backward (all shape sets)"} <= parts
    assert any(p.startswith("shape set") for p in parts)


def test_a_kernel_that_does_not_load_is_recorded_and_fails_the_run(tmp_path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, "kforge.yaml", "version: 1\nkernels:\n  k:\n    file: k.py\n    entry: kernel\n"
                               "    reference: ref.py:r\n    inputs: ref.py:i\n    targets: [cpu]\n")
    write(repo, "k.py", "def kernel(x):\n    return x\n")
    commit_all(repo, "no ref.py")
    proc = cli("track", "--json", "-", cwd=repo)
    assert proc.returncode == 1, proc.stderr
    [kernel] = json.loads(proc.stdout)["records"][0]["kernels"]
    assert kernel["status"] == "error" and "does not load" in kernel["reason"]
    assert Store(repo).read()  # recorded all the same


def test_a_commit_with_a_link_loop_is_tracked_not_a_crash(tmp_path) -> None:
    """Red-team pass (can a commit's files steer the history?): a commit on the main line that holds a symbolic link
    loop (`loop.py -> loop.py`) crashed `track` with a traceback before any kernel was measured, so that commit, and
    every run that tracks a range through it, recorded nothing. Now the loop is skipped and the kernel is recorded."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, "kforge.yaml", "version: 1\nkernels:\n  k:\n    file: k.py\n    entry: kernel\n"
                               "    reference: ref.py:r\n    inputs: ref.py:i\n    targets: [cpu]\n")
    write(repo, "k.py", "def kernel(x):\n    return x\n")
    (repo / "loop.py").symlink_to("loop.py")
    commit_all(repo, "no ref.py, and a link loop")
    proc = cli("track", "--json", "-", cwd=repo)
    assert "Traceback" not in proc.stderr, proc.stderr
    [kernel] = json.loads(proc.stdout)["records"][0]["kernels"]
    assert kernel["status"] == "error" and "does not load" in kernel["reason"]


def test_a_disturbed_measurement_is_taken_again_and_never_a_point(tmp_path: Path) -> None:
    """A timing the harness calls disturbed (`inconclusive`) is measured once more; disturbed twice, the commit's
    entry says so and no series gets a point from it (it was recorded as a crash, `error`, before)."""
    from fakes.gate_repos import tiny_spec_in
    from kforge_bot.config.policy import load_policy
    from kforge_bot.evaluate.wire.result import EvalResult
    from kforge_bot.history.track import measure_kernel
    from kforge_bot.kernelspec.kernels import discover
    from kforge_bot.targets import choose_target

    tiny_spec_in(tmp_path)
    policy = load_policy(None)
    [kernel] = discover(tmp_path, policy).values()
    disturbed = EvalResult(verdict="inconclusive", reason="disturbed: 91% of samples preempted", target="cpu")
    calls: list[str] = []

    def evaluator(*args: object, **kwargs: object) -> EvalResult:
        calls.append("run")
        return disturbed

    entry = measure_kernel(kernel, policy, choose_target("cpu"), 0.1, evaluator=evaluator)
    assert len(calls) == 2
    assert entry["status"] == "inconclusive" and "disturbed twice: disturbed: 91%" in entry["reason"]
    record = {"runs": [{"commit": "c" * 40, "subject": "s", "runner": {"key": "r"}, "kernels": [entry]}]}
    assert build_series({f"{RECORD_PREFIX}r/{'c' * 40}.json": record}, ["c" * 40]) == []
