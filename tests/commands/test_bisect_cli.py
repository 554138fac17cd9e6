"""`kforge-bot bisect`: a commit whose kernel does not build is reported and left out, never guessed through (the
first bad commit is then one of it and the next); bad input is a one-line error."""

from __future__ import annotations

import pytest

import json

from fakes.gate_repos import PLAIN, REF, cli, init_repo, manifest, slow_where
from fakes.gitrepos import commit_all, write

POLICY = "version: 1\ngate: {threshold: 0.25, confidence: 0.95}\nevaluation: {seeds: 1, timing_budget_s: 0.5}\n"
SLOW = slow_where("True", 40)


def repo_with(tmp_path, kernels: list[str]) -> list[str]:
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "kforge.yaml", manifest(["k"]))
    write(root, "policy.yml", POLICY)
    shas = []
    for i, source in enumerate(kernels):
        write(root, "k.py", source)
        shas.append(commit_all(root, f"step {i}"))
    return shas


@pytest.mark.slow
def test_a_commit_that_does_not_build_is_reported_not_guessed_through(tmp_path) -> None:
    shas = repo_with(tmp_path, [PLAIN, "def kernel(x, y:\n", SLOW, SLOW + "# the same, later\n"])
    proc = cli("bisect", "--good", shas[0], "--bad", shas[3], "--kernel", "k", "--policy", "policy.yml", "--json", "-",
               cwd=tmp_path / "repo")
    assert proc.returncode == 1, proc.stderr  # unresolved: it cannot say which of the two
    [result] = json.loads(proc.stdout)["results"]
    assert result["status"] == "unresolved" and result["candidates"] == [shas[1], shas[2]]
    assert [s["commit"] for s in result["skipped"]] == [shas[1]] and result["skipped"][0]["verdict"] == "error"
    assert {s["commit"]: s["verdict"] for s in result["steps"]} == {shas[3]: "regression", shas[1]: "error",
                                                                   shas[2]: "regression"}

    text = cli("bisect", "--good", shas[0], "--bad", shas[3], "--kernel", "k", "--policy", "policy.yml",
               cwd=tmp_path / "repo")
    assert "not judged: " + shas[1][:10] in text.stdout and "one of these" in text.stdout


def test_bad_input_is_a_one_line_error(tmp_path) -> None:
    shas = repo_with(tmp_path, [PLAIN, SLOW])
    proc = cli("bisect", "--good", shas[1], "--bad", shas[0], "--kernel", "k", cwd=tmp_path / "repo")
    assert proc.returncode == 2 and "is not an ancestor" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("bisect", "--good", "nope", "--bad", shas[0], cwd=tmp_path / "repo")
    assert proc.returncode == 2 and "unknown revision" in proc.stderr


@pytest.mark.slow
def test_a_commit_that_changes_the_kernels_test_is_reported_not_guessed_through(tmp_path) -> None:
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "kforge.yaml", manifest(["k"]))
    write(root, "policy.yml", POLICY)
    steps = [(REF, PLAIN), (REF.replace("return x * 2.0 + y", "return y + x * 2.0"), PLAIN), (REF, SLOW),
             (REF, SLOW + "# later\n")]
    shas = []
    for i, (ref, kernel) in enumerate(steps):
        write(root, "ref.py", ref)
        write(root, "k.py", kernel)
        shas.append(commit_all(root, f"step {i}"))
    proc = cli("bisect", "--good", shas[0], "--bad", shas[3], "--kernel", "k", "--policy", "policy.yml", "--json", "-",
               cwd=root)
    [result] = json.loads(proc.stdout)["results"]
    assert result["status"] == "unresolved" and result["candidates"] == [shas[1], shas[2]], result
    assert [(s["commit"], s["verdict"]) for s in result["skipped"]] == [(shas[1], "spec-changed")]
