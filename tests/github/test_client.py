"""kforge_bot.github.client: the real PyGithub client against the loopback GitHub API server, whose
responses are checked against GitHub's OpenAPI description, with real git repositories behind it."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import pytest

from kforge_bot import gitops
from kforge_bot.prbot import evidence
from kforge_bot.prbot.evidence import KernelEvidence, TargetRow
from kforge_bot.errors import KforgeError
from kforge_bot.github import events, trust
from kforge_bot.github.client import GitHub
from fakes.github_server import FakeGitHub
from fakes.gitrepos import commit_all, git, make_repos, write
from fakes.webhooks import as_fork, example, pr_comment

REPO = "octo/kernels"


@pytest.fixture()
def world(tmp_path):
    repos = make_repos(tmp_path)
    with FakeGitHub() as fake:
        fake.add_repo(REPO, repos.origin)
        fake.add_user("ada")
        fake.set_permission(REPO, "ada", "write")
        number = fake.add_pull(REPO, head_ref="feature", user="ada", author_association="COLLABORATOR",
                               labels=["perf"], title="Faster rmsnorm")
        yield fake, repos, number
        assert fake.schema_errors == [], "the fake sent responses that violate GitHub's OpenAPI description"


def client(fake: FakeGitHub, **kw) -> GitHub:
    kw.setdefault("throttle", False)
    kw.setdefault("retries", 2)
    kw.setdefault("secondary_rate_wait", 0.2)
    return GitHub(fake.token, REPO, api_url=fake.api_url, **kw)


def _push(repos, number, text="BLOCK = 512\n", kernel="rmsnorm"):
    return gitops.push_bot_branch(repos.clone, branch=gitops.bot_branch(number, kernel), parent=repos.head_sha,
                                  files={f"kernels/{kernel}.py": text}, message=f"kforge: faster {kernel}")


def test_from_env_and_repr(world):
    fake, _, _ = world
    gh = GitHub.from_env({"GITHUB_TOKEN": fake.token, "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": fake.api_url},
                         throttle=False)
    assert gh.repository_info()["full_name"] == REPO
    assert fake.token not in repr(gh)
    assert fake.requests[-1].path == "/api/v3/repos/octo/kernels"  # GHES-style prefix honoured
    with pytest.raises(KforgeError, match="GITHUB_TOKEN is not set.*github-token"):
        GitHub.from_env({"GITHUB_REPOSITORY": REPO})
    with pytest.raises(KforgeError, match="not owner/name"):
        GitHub("t", "just-a-name")


def test_get_pull_completes_a_comment_event(world):
    fake, repos, number = world
    gh = client(fake)
    pull = gh.get_pull(number)
    assert pull["head"]["sha"] == repos.head_sha and pull["base"]["ref"] == "main"
    payload = pr_comment("/kforge retry", association="COLLABORATOR", login="ada")
    payload["repository"]["full_name"] = REPO
    payload["issue"]["number"] = number
    ev = events.parse_event("issue_comment", payload).with_pull(pull)
    assert ev.complete and ev.head_sha == repos.head_sha and ev.is_fork is False
    assert ev.author == "ada" and ev.labels == ("perf",) and ev.command == "retry"


def test_open_then_rerun_updates_the_same_pr(world):
    fake, repos, number = world
    gh = client(fake)
    branch = gitops.bot_branch(number, "rmsnorm")
    assert gh.find_follow_up(branch) is None
    _push(repos, number)
    first = gh.open_or_update_follow_up(branch=branch, base="feature", base_repo=REPO,
                                        title="kforge: rmsnorm 1.5x", body="v1")
    assert first.action == "created" and first.url.endswith(f"/pull/{first.number}")
    pr = fake.pulls[(REPO, first.number)]
    assert (pr.head_ref, pr.base_ref, pr.body) == (branch, "feature", "v1")

    _push(repos, number, "BLOCK = 1024\n")
    second = gh.open_or_update_follow_up(branch=branch, base="feature", base_repo=REPO,
                                         title="kforge: rmsnorm 1.9x", body="v2")
    assert second.action == "updated" and second.number == first.number
    assert [p.number for p in fake.pulls_of(REPO) if p.head_ref == branch] == [first.number]
    assert (pr.title, pr.body) == ("kforge: rmsnorm 1.9x", "v2")
    assert gh.find_follow_up(branch).head_sha == fake.branch_sha(REPO, branch)
    # The search always names the owner: without it GitHub ignores the head filter.
    searches = [r for r in fake.requests if r.method == "GET" and r.template == "/repos/{owner}/{repo}/pulls"]
    assert searches and all(r.query["head"] == f"octo:{branch}" and r.query["state"] == "open" for r in searches)
    assert sum(1 for r in fake.writes() if r.template == "/repos/{owner}/{repo}/pulls") == 1


def test_concurrent_open_updates_instead_of_failing(world, monkeypatch):
    fake, repos, number = world
    gh = client(fake)
    branch = gitops.bot_branch(number, "rmsnorm")
    _push(repos, number)
    other = gh.open_or_update_follow_up(branch=branch, base="feature", base_repo=REPO, title="t", body="from another run")
    real = gh.find_follow_up
    calls = []

    def stale_then_real(b, state="open"):  # the first search ran before the other run created its PR
        calls.append(b)
        return None if len(calls) == 1 else real(b, state)

    monkeypatch.setattr(gh, "find_follow_up", stale_then_real)
    result = gh.open_or_update_follow_up(branch=branch, base="feature", base_repo=REPO, title="t2", body="mine")
    assert result.action == "updated" and result.number == other.number
    assert len(fake.pulls_of(REPO)) == 2  # the original PR and one follow-up


def test_never_targets_a_fork_branch(world):
    fake, repos, number = world
    gh = client(fake)
    _push(repos, number)
    # The fork's branch is called "main", like this repository's: a wrong base would be a disaster.
    with pytest.raises(KforgeError, match="cannot open a follow-up PR against mallory/kernels:main"):
        gh.open_or_update_follow_up(branch=gitops.bot_branch(number, "rmsnorm"), base="main",
                                    base_repo="mallory/kernels", title="t", body="b")
    assert fake.writes() == []


def test_closed_follow_up_is_found_with_state_all(world):
    fake, repos, number = world
    gh = client(fake)
    branch = gitops.bot_branch(number, "rmsnorm")
    _push(repos, number)
    pr = gh.open_or_update_follow_up(branch=branch, base="feature", base_repo=REPO, title="t", body="b")
    gh.close_pull(pr.number, comment="Stopped by /kforge stop.")
    assert gh.find_follow_up(branch) is None
    closed = gh.find_follow_up(branch, state="all")
    assert closed.number == pr.number and closed.state == "closed" and not closed.merged
    assert fake.comments_on(REPO, pr.number)[0].body == "Stopped by /kforge stop."


def test_upsert_comment_finds_its_marker_across_pages(world):
    fake, _, number = world
    gh = client(fake)
    for i in range(35):  # more than one page (30 per page by default)
        fake.add_comment(REPO, number, f"human comment {i}", "ada")
    marker = f"<!-- kforge-bot:summary pr={number} -->"
    c1 = gh.upsert_comment(number, "rmsnorm: 1.5x faster", marker)
    assert c1.action == "created"
    c2 = gh.upsert_comment(number, "rmsnorm: 1.9x faster", marker)
    assert (c2.action, c2.id) == ("updated", c1.id)
    c3 = gh.upsert_comment(number, "rmsnorm: 1.9x faster", marker)
    assert c3.action == "unchanged"
    # A person pasting the marker into a later comment does not capture the bot's comment.
    fake.add_comment(REPO, number, f"quoting the bot {marker}", "ada")
    c4 = gh.upsert_comment(number, "rmsnorm: 2.0x faster", marker)
    assert (c4.action, c4.id) == ("updated", c1.id)
    mine = [c for c in fake.comments_on(REPO, number) if marker in c.body and c.user == fake.bot_login]
    assert len(mine) == 1 and mine[0].body.startswith("rmsnorm: 2.0x faster") and mine[0].body.rstrip().endswith(marker)
    assert len(fake.comments_on(REPO, number)) == 37
    assert any(r.query.get("page") == "2" for r in fake.requests if r.template and r.template.endswith("/comments"))


def test_status_permission_user_label(world):
    fake, repos, number = world
    gh = client(fake)
    gh.set_status(repos.head_sha, "success", "x" * 200, target_url="https://ci.example/run/1")
    status = fake.statuses[-1]
    assert (status["sha"], status["state"], status["context"]) == (repos.head_sha, "success", "kforge-bot")
    assert len(status["description"]) == 140 and status["target_url"] == "https://ci.example/run/1"
    with pytest.raises(KforgeError, match="state 'ok' is not one of"):
        gh.set_status(repos.head_sha, "ok", "d")
    with pytest.raises(KforgeError, match="No commit found for SHA"):
        gh.set_status("f" * 40, "success", "d")

    assert gh.permission("octo") == "admin"
    assert gh.permission("ada") == "write"
    fake.add_user("eve")
    assert gh.permission("eve") == "read"  # public repository, not a collaborator
    with pytest.raises(KforgeError, match=r"not found while reading the permission of @nobody \(404"):
        gh.permission("nobody")
    assert gh.user("ada")["login"] == "ada"

    assert gh.remove_label(number, "perf") is True
    assert fake.pulls[(REPO, number)].labels == []
    assert gh.remove_label(number, "perf") is False


def test_403_gives_the_permissions_fix(world):
    fake, repos, number = world
    gh = client(fake)
    _push(repos, number)
    fake.inject("POST", "/repos/{owner}/{repo}/pulls", 403, "Resource not accessible by integration")
    with pytest.raises(KforgeError) as info:
        gh.open_or_update_follow_up(branch=gitops.bot_branch(number, "rmsnorm"), base="feature", base_repo=REPO,
                                    title="t", body="b")
    text = str(info.value)
    assert "permission denied while opening the pull request kforge/pr-1/rmsnorm -> feature" in text
    assert "403 Resource not accessible by integration" in text and "pull-requests: write" in text
    assert "\n" not in text and fake.token not in text


def test_422_when_the_branch_was_not_pushed(world):
    fake, _, number = world
    gh = client(fake)
    with pytest.raises(KforgeError) as info:
        gh.open_or_update_follow_up(branch=gitops.bot_branch(number, "gelu"), base="feature", base_repo=REPO,
                                    title="t", body="b")
    text = str(info.value)
    assert "GitHub rejected the request while opening the pull request" in text
    assert "422 Validation Failed: head invalid" in text and "push kforge/pr-1/gelu first" in text


def test_422_body_too_long(world):
    fake, _, number = world
    gh = client(fake)
    with pytest.raises(KforgeError, match="body is too long \\(maximum is 65536 characters\\)"):
        gh.upsert_comment(number, "x" * 70000, "<!-- m -->")


def test_primary_rate_limit_fails_fast_with_the_reset_time(world):
    fake, _, number = world
    gh = client(fake, max_rate_limit_wait=5)
    fake.inject_rate_limit("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", reset_in=3600)
    start = time.monotonic()
    with pytest.raises(KforgeError) as info:
        gh.get_pull(number)
    assert time.monotonic() - start < 5
    text = str(info.value)
    assert "rate limit exceeded while reading pull request #1" in text and "API rate limit exceeded" in text
    assert "resets at" in text and "UTC" in text


def test_secondary_rate_limit_is_retried(world):
    fake, _, number = world
    gh = client(fake)
    fake.inject_secondary_rate_limit("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", retry_after=1, times=1)
    assert gh.get_pull(number)["number"] == number
    hits = [r for r in fake.requests if r.template == "/repos/{owner}/{repo}/pulls/{pull_number}"]
    assert len(hits) == 2


def test_secondary_rate_limit_that_persists(world):
    fake, _, number = world
    gh = client(fake, retries=1)
    fake.inject_secondary_rate_limit("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", retry_after=0, times=5)
    with pytest.raises(KforgeError, match="rate limit exceeded while reading pull request #1"):
        gh.get_pull(number)
    fake.inject_secondary_rate_limit("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", retry_after=0, times=5,
                                     status=403)
    with pytest.raises(KforgeError, match="rate limit exceeded while reading pull request #1.*wait"):
        gh.get_pull(number)


def test_bad_token_and_unreachable_server(world, caplog):
    fake, _, number = world
    secret = "ghp_not_the_right_token_ABCDEF"
    gh = GitHub(secret, REPO, api_url=fake.api_url, throttle=False, retries=0)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(KforgeError) as info:
        gh.get_pull(number)
    assert "the token was rejected while reading pull request #1 (401 Bad credentials)" in str(info.value)
    assert secret not in str(info.value) and secret not in caplog.text
    assert fake.requests[-1].authorization == f"token {secret}"  # it was sent, only to the API

    dead = GitHub(fake.token, REPO, api_url="http://127.0.0.1:9/api/v3", throttle=False, retries=0, timeout=2)
    with pytest.raises(KforgeError, match="cannot reach GitHub while reading pull request #1.*GITHUB_API_URL"):
        dead.get_pull(number)


def test_unknown_repository_is_404_with_a_hint(world):
    fake, _, _ = world
    gh = GitHub(fake.token, "octo/missing", api_url=fake.api_url, throttle=False, retries=0)
    with pytest.raises(KforgeError, match="not found while reading octo/missing.*private repositories answer 404"):
        gh.repository_info()


def test_the_schema_check_is_not_vacuous(world, monkeypatch):
    fake, _, number = world
    gh = client(fake)
    real = fake._user
    monkeypatch.setattr(fake, "_user", lambda login: {k: v for k, v in real(login).items() if k != "node_id"})
    with pytest.raises(KforgeError, match="418"):
        gh.get_pull(number)
    assert any("'node_id' is a required property" in e for e in fake.schema_errors)
    fake.schema_errors.clear()  # expected here; the fixture checks the rest


# -- The pieces together, in the order the `pr` command uses them --------------------------------

def _event(fake, repos, number, *, fork=False, action="opened"):
    payload = example("pull_request", action)
    if fork:
        as_fork(payload)
    payload["repository"]["full_name"] = REPO
    pr = payload["pull_request"]
    pr["number"] = payload["number"] = number
    pr["base"]["repo"]["full_name"] = REPO
    if not fork:
        pr["head"]["repo"]["full_name"] = REPO
        pr["user"]["login"], pr["author_association"] = "ada", "COLLABORATOR"
    pr["base"].update(ref="main", sha=repos.base_sha)
    pr["head"].update(ref="feature", sha=repos.head_sha)
    return events.parse_event("pull_request_target", payload)


def _outcome(speedup=1.8, low=1.7, high=1.9):
    return KernelEvidence(kernel="rmsnorm", file="kernels/rmsnorm.py",
                         targets=(TargetRow("cpu", ("self-hosted", "kforge-cpu"), 2.0, 2.0 / speedup, speedup, low,
                                            high, correct=True, target_kind="cpu"),),
                         correctness={"ok": True, "seeds": [0, 1, 2]})


def _publish(gh, repos, ev, outcome, files, min_speedup=1.05):
    """What `kforge-bot pr` does after the loop, per kernel, then once per PR."""
    branch = gitops.bot_branch(ev.number, outcome.kernel)
    row = outcome.targets[0]
    if not (row.correct and row.ci_low is not None and row.ci_low > 1.0 and row.speedup >= min_speedup):
        outcome = replace(outcome, skip_reason="no improvement")
    else:
        push = gitops.push_bot_branch(repos.clone, branch=branch, parent=ev.head_sha, files=files,
                                      message=evidence.render_title(outcome))
        if push.status == "human-pushed":
            outcome = replace(outcome, skip_reason=f"someone else pushed to {branch}; kforge-bot no longer updates it",
                              pr_url=None)
        else:
            outcome = replace(outcome, branch=branch)
            pr = gh.open_or_update_follow_up(
                branch=branch, base=ev.head_ref, base_repo=ev.head_repo, title=evidence.render_title(outcome),
                body=evidence.render_pr_body(outcome, pr_number=ev.number, head_branch=ev.head_ref))
            outcome = replace(outcome, pr_url=pr.url, pr_number=pr.number)
    gh.upsert_comment(ev.number, evidence.render_comment([outcome], pr_number=ev.number),
                      evidence.comment_marker(ev.number))
    gh.set_status(ev.head_sha, "success", evidence.status_description([outcome]))
    return outcome


def test_flow_open_then_rerun(world):
    fake, repos, number = world
    gh = client(fake)
    ev = _event(fake, repos, number)
    assert trust.decide(ev, author_permission=gh.permission(ev.author)).allowed
    first = _publish(gh, repos, ev, _outcome(1.5, 1.4, 1.6), {"kernels/rmsnorm.py": "BLOCK = 512\n"})
    second = _publish(gh, repos, ev, _outcome(1.8, 1.7, 1.9), {"kernels/rmsnorm.py": "BLOCK = 1024\n"})
    assert first.pr_number == second.pr_number
    follow_ups = [p for p in fake.pulls_of(REPO) if p.head_ref.startswith("kforge/")]
    assert len(follow_ups) == 1
    pr = follow_ups[0]
    assert pr.base_ref == "feature" and pr.title == "kforge: rmsnorm 1.80x faster on cpu"
    assert "| cpu (`[self-hosted, kforge-cpu]`) | 2.00 ms | 1.11 ms | 1.80x (1.70-1.90) | n/a |" in pr.body
    assert fake._git(REPO, "show", f"{pr.head_ref}:kernels/rmsnorm.py") == "BLOCK = 1024"
    comments = fake.comments_on(REPO, number)
    assert len(comments) == 1 and "1.80x on cpu (1.70-1.90) -> [#" in comments[0].body
    assert [s["description"] for s in fake.statuses] == [f"1 kernel: 1 follow-up PR (#{pr.number})"] * 2


def test_flow_human_push_stops_updates(world, tmp_path):
    fake, repos, number = world
    gh = client(fake)
    ev = _event(fake, repos, number)
    first = _publish(gh, repos, ev, _outcome(1.5, 1.4, 1.6), {"kernels/rmsnorm.py": "BLOCK = 512\n"})
    body_before = fake.pulls[(REPO, first.pr_number)].body
    human = tmp_path / "human"
    git(tmp_path, "clone", "-q", "-b", first.branch, str(repos.origin), str(human))
    write(human, "kernels/rmsnorm.py", "BLOCK = 640  # hand-tuned\n")
    commit_all(human, "hand tuning on top of the bot")
    git(human, "push", "-q", "origin", first.branch)

    again = _publish(gh, repos, ev, _outcome(1.9, 1.8, 2.0), {"kernels/rmsnorm.py": "BLOCK = 2048\n"})
    assert again.pr_url is None and "no longer updates it" in again.skip_reason
    assert fake.pulls[(REPO, first.pr_number)].body == body_before  # PR untouched
    assert fake._git(REPO, "show", f"{first.branch}:kernels/rmsnorm.py") == "BLOCK = 640  # hand-tuned"
    assert "someone else pushed to kforge/pr-1/rmsnorm" in fake.comments_on(REPO, number)[0].body


def test_flow_no_improvement_comments_and_opens_nothing(world):
    fake, repos, number = world
    gh = client(fake)
    ev = _event(fake, repos, number)
    out = _publish(gh, repos, ev, _outcome(1.01, 0.97, 1.05), {"kernels/rmsnorm.py": "BLOCK = 512\n"})
    assert out.skip_reason == "no improvement"
    assert [p.number for p in fake.pulls_of(REPO)] == [number]  # only the original PR
    assert fake.branch_sha(REPO, gitops.bot_branch(number, "rmsnorm")) is None  # nothing pushed
    body = fake.comments_on(REPO, number)[0].body
    assert "no follow-up PR: no improvement (measured: 1.01x on cpu (0.97-1.05))" in body


def test_flow_fork_without_label_runs_nothing(world):
    fake, repos, number = world
    gh = client(fake)
    fake.add_fork("mallory/kernels", REPO)
    ev = _event(fake, repos, number, fork=True)
    allowed, reason = trust.decide(ev, author_permission=gh.permission(ev.author))
    assert not allowed and "a maintainer must add the 'kforge:run' label" in reason
    gh.upsert_comment(ev.number, evidence.render_comment([], pr_number=ev.number, note=f"not run: {reason}"),
                      evidence.comment_marker(ev.number))
    assert "not run: fork PR from mallory/Hello-World" in fake.comments_on(REPO, number)[0].body
    assert [r for r in fake.writes() if r.template != "/repos/{owner}/{repo}/issues/{issue_number}/comments"] == []
