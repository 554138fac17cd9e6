"""The workload gate end to end on the CPU: tinylm on CPU kernels in a real git repository (tests/fakes/
workload_repos.py), `kforge-bot gate` in a child process, verdicts asserted (never ratios). A head whose softmax is
faster alone but slows the model fails; a head whose softmax passes its own check but changes the greedy tokens
fails; an A/A head passes. Without the workloads (a manifest as kforge-bot read it before them) both failing
heads pass the gate: the kernels' rows alone cannot see what they do to the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.gate_repos import cli
from fakes.gitrepos import commit_all, git, write
from fakes.workload_repos import SOFTMAX, SOFTMAX_FAST_ALONE, SOFTMAX_SHORT_LOG2E, tinylm_repo

pytestmark = pytest.mark.timeout(1200)


def gate(repo: Path, tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "report.json"
    proc = cli("gate", "--base", "main", "--head", "HEAD", "--policy", "policy.yml", "--target", "cpu",
               "--json", str(out), "--no-cache", cwd=repo)
    assert out.is_file(), proc.stdout + proc.stderr
    return proc.returncode, json.loads(out.read_text())


def head_with_softmax(tmp_path: Path, source: str, *, workloads: bool = True) -> Path:
    repo = tinylm_repo(tmp_path / "repo", workloads=workloads)
    git(repo, "checkout", "-q", "-b", "head")
    write(repo, "kernels/softmax.py", source)
    commit_all(repo, "head: softmax")
    return repo


def rows(report: dict) -> tuple[dict, dict]:
    kernels = {k["name"]: k for k in report["kernels"]}
    workloads = {w["name"]: w for w in report.get("workloads", [])}  # none in a report of the gate before them
    return kernels, workloads


@pytest.mark.slow
def test_a_kernel_faster_alone_that_slows_the_model_fails_the_gate(tmp_path: Path) -> None:
    repo = head_with_softmax(tmp_path, SOFTMAX_FAST_ALONE)
    code, report = gate(repo, tmp_path)
    kernels, workloads = rows(report)
    assert kernels["softmax"]["verdict"] in ("pass", "improved")
    assert workloads["decode"]["verdict"] == "regression", workloads["decode"]
    assert "slower end to end" in workloads["decode"]["reason"]
    assert code == 1


@pytest.mark.slow
def test_a_kernel_that_changes_the_greedy_tokens_fails_the_gate(tmp_path: Path) -> None:
    repo = head_with_softmax(tmp_path, SOFTMAX_SHORT_LOG2E)
    code, report = gate(repo, tmp_path)
    kernels, workloads = rows(report)
    assert kernels["softmax"]["verdict"] not in ("incorrect", "error")
    assert workloads["decode"]["verdict"] == "incorrect", workloads["decode"]
    assert "greedy tokens differ" in workloads["decode"]["reason"]
    assert code == 1


@pytest.mark.slow
def test_an_a_a_change_passes_with_its_interval_and_noise_floor(tmp_path: Path) -> None:
    repo = head_with_softmax(tmp_path, SOFTMAX + "\n# the same kernel\n")
    code, report = gate(repo, tmp_path)
    _, workloads = rows(report)
    row = workloads["decode"]
    assert row["verdict"] == "pass", row
    assert row["pairs"] >= 6 and row["speedup_ci"] is not None and row["noise_floor"] is not None
    assert row["measurement"]["warmup_ms"]["base"] and row["measurement"]["warmup_ms"]["head"]
    assert code == 0


@pytest.mark.slow
@pytest.mark.parametrize("source", [SOFTMAX_FAST_ALONE, SOFTMAX_SHORT_LOG2E], ids=["faster-alone", "other-tokens"])
def test_without_workloads_the_kernel_gate_alone_passes_both(tmp_path: Path, source: str) -> None:
    repo = head_with_softmax(tmp_path, source, workloads=False)
    code, report = gate(repo, tmp_path)
    kernels, workloads = rows(report)
    assert kernels["softmax"]["verdict"] in ("pass", "improved") and not workloads
    assert code == 0
