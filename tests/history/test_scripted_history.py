"""The done-when of the performance history, end to end through the CLI on a real repository: 30 commits of a noisy
CPU kernel with a 40% step at commit 10 and a 50% step at commit 20 (its time relative to its reference). `track`
over them; `history` finds both steps at their commits and nothing else; `bisect` finds each within log2(30) + 2
measurements; an acknowledgement silences the first. Verdicts only: the machine may be busy. The steps are large
because this test is the plumbing end to end (a 6% step, then a 15% one, were lost in the noise of CI runs of the
whole suite: benchmarks/results/ci_cpu.md); small steps against the threshold are test_changes.py's, on scripted
series. `track` runs under a 10% threshold and `bisect` under 20% (each a policy outside the checkout)."""

from __future__ import annotations

import json
import math

import pytest

from fakes.gate_repos import cli
from fakes.history_repos import scripted_history

REPS = [400] * 10 + [560] * 10 + [840] * 10
pytestmark = pytest.mark.timeout(1500)


def run(*args: str, cwd) -> dict:
    proc = cli(*args, "--json", "-", cwd=cwd, timeout=1200)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_track_history_bisect_ack(tmp_path) -> None:
    repo = tmp_path / "repo"
    shas = scripted_history(repo, REPS)

    # Tracked under a 10% threshold: the steps are 40% and 50%, and on a two-core runner shared with the rest of the
    # suite a run of three commits timed minutes apart drifted past 3% (CI's clean-clone run of 4ed9cff: a third
    # change point, an "improvement"). Small steps against the threshold are test_changes.py's, on scripted series.
    track_policy = tmp_path / "track-policy.yml"  # outside the checkout: the runner's, not a commit's
    # A third of the repository's 1.5 s of timing per commit: the steps are far past the threshold.
    track_policy.write_text((repo / "policy.yml").read_text().replace("cpu: 0.03", "cpu: 0.10")
                            .replace("timing_budget_s: 1.5", "timing_budget_s: 0.5"))
    tracked = run("track", "--rev", shas[0], "--range", f"{shas[0]}..{shas[-1]}", "--policy", str(track_policy),
                  cwd=repo)
    assert len(tracked["records"]) == 30
    assert all(r["kernels"][0]["status"] == "measured" for r in tracked["records"])
    runner = tracked["records"][0]["runner"]
    assert runner["kind"] == "cpu" and runner["harness"] and runner["torch"] and runner["triton"]

    report = run("history", cwd=repo)
    found = {(c["commit"], c["regression"]) for c in report["change_points"]}
    assert found == {(shas[10], True), (shas[20], True)}, json.dumps(
        [{**c, "index": shas.index(c["commit"]) if c["commit"] in shas else None} for c in report["change_points"]],
        indent=1)

    budget = math.log2(30) + 2
    # The bisection judges 40-50% steps, and its A/A steps (two commits of one level) at the history's 3% were a coin
    # flip on a busy two-core runner (CI's clean-clone run of 396ef06: an A/A step judged a regression, the wrong
    # commit named): bisect's policy sets 20%, as a user bisecting a large step would.
    bisect_policy = tmp_path / "bisect-policy.yml"  # outside the checkout: the runner's, not a commit's
    bisect_policy.write_text((repo / "policy.yml").read_text().replace("cpu: 0.03", "cpu: 0.20"))
    for good, bad, first in ((shas[0], shas[-1], shas[10]), (shas[10], shas[-1], shas[20])):
        result = run("bisect", "--good", good, "--bad", bad, "--kernel", "noisy", "--policy", str(bisect_policy),
                     "--timing-budget", "1", cwd=repo)["results"][0]
        assert result["status"] == "found", result
        assert result["first_bad"] == first, result
        assert result["measurements"] <= budget, result

    proc = cli("ack", f"noisy@{shas[10][:12]}", "--reason", "the accuracy fix costs this", "--by", "ada", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    report = run("history", cwd=repo)
    acked = {c["commit"]: c["acknowledged"] for c in report["change_points"]}
    assert acked[shas[10]]["by"] == "ada" and "accuracy fix" in acked[shas[10]]["reason"]
    assert acked[shas[20]] is None
