"""`kforge-bot history --alert` end to end: a tracked history with one large step; the change point is re-measured
(the commits on each side, interleaved), bisected to its commit, and filed as one issue through the real PyGithub
client against the loopback GitHub; the exit code says a regression was confirmed."""

from __future__ import annotations

import json

from fakes.gate_repos import PLAIN, REF, cli, init_repo, manifest, slow_where
from fakes.github_server import FakeGitHub
from fakes.gitrepos import commit_all, git, write
from kforge_bot.history.alerts import LABEL

POLICY = "version: 1\ngate: {threshold: 0.05, confidence: 0.95}\nevaluation: {seeds: 1, timing_budget_s: 0.5}\n"
REPO = "octo/kernels"


def test_alert_confirms_bisects_and_files_one_issue(tmp_path) -> None:
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "kforge.yaml", manifest(["k"]))
    write(root, "policy.yml", POLICY)
    shas = []
    for i in range(8):
        write(root, "k.py", PLAIN if i < 4 else slow_where("True", 40))
        write(root, "NOTES.md", f"{i}\n")
        shas.append(commit_all(root, f"step {i}" + (": @octocat made it slow" if i == 4 else "")))
    proc = cli("track", "--rev", shas[0], "--range", f"{shas[0]}..{shas[-1]}", "--policy", "policy.yml", cwd=root)
    assert proc.returncode == 0, proc.stderr

    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    with FakeGitHub() as fake:
        fake.add_repo(REPO, origin)
        env = {"GITHUB_TOKEN": fake.token, "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": fake.api_url}
        proc = cli("history", "--remote", "", "--alert", "--policy", "policy.yml", "--json", "-", cwd=root, env=env)
        assert proc.returncode == 1, proc.stderr  # a confirmed regression
        [alert] = json.loads(proc.stdout)["alerts"]
        assert alert["confirmed"] and alert["bisect"]["first_bad"] == shas[4]
        [issue] = fake.issues_of(REPO)
        assert issue.labels == [LABEL] and shas[4] in issue.body and "shape set" in issue.body
        assert "@octocat" not in issue.body.replace("`step 4: @octocat made it slow`", "")  # quoted, not a mention
        assert fake.schema_errors == []
