"""`kforge-bot recheck` end to end: optimize's accepted candidates and the bot's follow-up branches, judged again by
today's harness; a kernel an older harness passed and today's does not is reported, with both versions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.evaluate.test_heldout_attacks import CANDIDATES, write_problem

ROOT = Path(__file__).resolve().parents[2]
OLD = "0.1.0+harness.8"


def _kernel_source(body: str) -> str:
    return "import torch\n\n\ndef kernel(x):\n" + "".join(f"    {line}\n" for line in body.splitlines())


def _recheck(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "kforge_bot.cli", "recheck", "--isolation", "off", *map(str, args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _report(folder: Path, spec_root: Path, accepted: dict[int, str]) -> None:
    """A report folder as optimize writes it: a start event, then each candidate and its accepted result."""
    (folder / "candidates").mkdir(parents=True)
    events = [{"event": "start", "schema": 1, "kernel": "rownorm", "format": "manifest", "root": str(spec_root),
               "kernel_file": "kernel.py", "entry": "kernel"}]
    for iteration, body in accepted.items():
        rel = f"candidates/{iteration:04d}.py"
        (folder / rel).write_text(_kernel_source(body))
        events += [{"event": "candidate", "iteration": iteration, "file": rel},
                   {"event": "result", "iteration": iteration, "accepted": True,
                    "result": {"verdict": "pass", "reason": "correct on every case; 1.50x",
                               "details": {"harness_version": OLD}}}]
    (folder / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.mark.slow
def test_recheck_reports_the_kernels_today_s_harness_no_longer_passes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_problem(repo, "manifest", "rownorm")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "rownorm")
    _git(repo, "checkout", "-qb", "kforge/pr-3/rownorm")
    (repo / "kernel.py").write_text(_kernel_source(CANDIDATES[("rownorm", "reshape")]))
    _git(repo, "commit", "-qam", "kforge: faster rownorm")
    _git(repo, "checkout", "-q", "main")
    report = tmp_path / "kforge-report"
    _report(report, repo, {2: CANDIDATES[("rownorm", "honest")], 5: CANDIDATES[("rownorm", "chunks256")]})

    run = _recheck(report, "--repo", repo, "--target", "cpu", "--json", tmp_path / "out.json")
    assert run.returncode == 1, run.stdout + run.stderr
    rows = {r["origin"]: r for r in json.loads((tmp_path / "out.json").read_text())["rechecked"]}
    assert len(rows) == 3, rows
    honest = rows["kforge-report: iteration 2 (candidates/0002.py)"]
    chunks = rows["kforge-report: iteration 5 (candidates/0005.py)"]
    follow_up = rows["kforge/pr-3/rownorm (follow-up of PR #3)"]
    assert honest["still_passes"], honest
    assert not chunks["still_passes"] and chunks["verdict"] == "incorrect" and "held-out variant" in chunks["reason"]
    assert chunks["passed_by"] == OLD and chunks["today"].endswith("harness.9")
    assert not follow_up["still_passes"] and "held-out variant" in follow_up["reason"], follow_up
    assert "3 kernel(s) rechecked: 1 still pass, 2 no longer pass" in run.stdout


def test_recheck_without_anything_to_check_is_a_usage_error() -> None:
    run = _recheck()
    assert run.returncode == 2 and "nothing to recheck" in run.stderr and "Traceback" not in run.stderr
