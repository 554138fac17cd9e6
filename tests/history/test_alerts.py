"""A confirmed change point opens one issue per kernel through the real PyGithub client against the loopback GitHub
(responses checked against GitHub's OpenAPI description); a second one comments on it, once; what a commit's subject
says is quoted, never a mention or a link."""

from __future__ import annotations

import pytest

from fakes.github_server import FakeGitHub
from fakes.gitrepos import make_repos
from kforge_bot.github.client import GitHub
from kforge_bot.history.alerts import LABEL, Alert, file_issue
from kforge_bot.history.bisect import BisectResult, Step
from kforge_bot.history.changes import ChangePoint

REPO = "octo/kernels"


@pytest.fixture()
def fake(tmp_path):
    repos = make_repos(tmp_path)
    with FakeGitHub() as server:
        server.add_repo(REPO, repos.origin)
        yield server
        assert server.schema_errors == [], "the fake sent responses that violate GitHub's OpenAPI description"


def alert(commit: str, subject: str, change: str) -> Alert:
    point = ChangePoint("softmax", "softmax", "shape set 0 (n=64)", "cpu", "cpu-cpu-x", 10, commit, subject,
                        1.0, 1.25, 0.25, 0.03)
    result = BisectResult("softmax", "a" * 40, "b" * 40, 30, "found", commit, subject, change,
                          steps=[Step(commit, subject, "regression", change, "slower")])
    return Alert(point, ["shape set 0 (n=64)"], result)


def test_one_issue_per_kernel_then_one_comment_per_change_point(fake) -> None:
    gh = GitHub(fake.token, REPO, api_url=fake.api_url, throttle=False, retries=0)
    first = alert("c" * 40, "speed up @octocat see https://evil.example", "+25.3% (+23.0% to +27.9%)")
    made = file_issue(gh, first)
    assert made.action == "created"
    [issue] = fake.issues_of(REPO)
    assert issue.labels == [LABEL] and "softmax" in issue.title and "c" * 10 in issue.title
    assert "+25.3% (+23.0% to +27.9%)" in issue.body and "c" * 40 in issue.body and "shape set 0 (n=64)" in issue.body
    assert "`speed up @octocat see https://evil.example`" in issue.body  # quoted as code: no mention, no link

    assert file_issue(gh, first).action == "unchanged"  # the same change point again: nothing new
    second = alert("d" * 40, "notes", "+6.1% (+4.0% to +8.2%)")
    assert file_issue(gh, second).action == "commented"
    assert file_issue(gh, second).action == "unchanged"
    assert len(fake.issues_of(REPO)) == 1
    [comment] = fake.comments_on(REPO, issue.number)
    assert "+6.1% (+4.0% to +8.2%)" in comment.body and "d" * 40 in comment.body
