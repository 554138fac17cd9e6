"""`kforge-bot ack`: from the command line, and as `/kforge ack` in a comment on the regression issue, obeyed only for
a commenter the bot's other comment commands obey (trusted association and write permission); the acknowledgement
lands on the history ref, shared through the remote, with who and why."""

from __future__ import annotations

import json

import pytest

from fakes.gate_repos import cli
from fakes.github_server import FakeGitHub, Issue
from fakes.gitrepos import make_repos
from fakes.webhooks import example
from kforge_bot.history.acks import acks_of
from kforge_bot.history.store import Store

REPO = "octo/kernels"


def comment_event(tmp_path, body: str, login: str, association: str, number: int):
    payload = example("issue_comment", "created")
    payload["issue"]["number"] = number
    payload["issue"].pop("pull_request", None)
    payload["comment"].update(body=body, author_association=association)
    payload["comment"]["user"] = {**payload["comment"]["user"], "login": login}
    payload["repository"]["full_name"] = REPO
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return path


@pytest.fixture()
def world(tmp_path):
    repos = make_repos(tmp_path / "repos")
    with FakeGitHub() as fake:
        fake.add_repo(REPO, repos.origin)
        for login, permission in (("ada", "write"), ("mallory", "read")):
            fake.add_user(login)
            fake.set_permission(REPO, login, permission)
        fake.issues[(REPO, 7)] = Issue(7, REPO, "kforge-bot: k slower", "body", fake.bot_login, ["kforge:regression"],
                                       id=77)
        yield fake, repos
        assert fake.schema_errors == []


def env_for(fake, event_path) -> dict[str, str]:
    return {"GITHUB_TOKEN": fake.token, "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": fake.api_url,
            "GITHUB_EVENT_PATH": str(event_path), "GITHUB_EVENT_NAME": "issue_comment"}


def test_cli_ack_is_kept_with_who_and_why(world) -> None:
    _, repos = world
    proc = cli("ack", f"k@{repos.base_sha[:12]}", "--reason", "accepted: the new layout", "--by", "ada",
               cwd=repos.clone)
    assert proc.returncode == 0, proc.stderr
    store = Store(repos.clone, "origin")
    store.fetch()
    [ack] = acks_of(store.read()).values()
    assert (ack["by"], ack["reason"], ack["via"], ack["commit"]) == ("ada", "accepted: the new layout", "cli",
                                                                     repos.base_sha)


def test_ack_without_a_reason_is_a_usage_error(world) -> None:
    _, repos = world
    proc = cli("ack", f"k@{repos.base_sha[:12]}", "--reason", "  ", cwd=repos.clone)
    assert proc.returncode == 2 and "needs a reason" in proc.stderr
    proc = cli("ack", "no-commit-here", "--reason", "x", cwd=repos.clone)
    assert proc.returncode == 2 and "not a change point's id" in proc.stderr


def test_comment_ack_obeys_a_trusted_writer_only(world, tmp_path) -> None:
    fake, repos = world
    sha = repos.base_sha[:12]
    refused = comment_event(tmp_path, f"/kforge ack k@{sha} looks fine to me", "mallory", "COLLABORATOR", 7)
    proc = cli("ack", "--from-event", cwd=repos.clone, env=env_for(fake, refused))
    assert proc.returncode == 0, proc.stderr
    assert "ignored" in proc.stdout and "write access" in proc.stdout
    store = Store(repos.clone, "origin")
    store.fetch()
    assert acks_of(store.read()) == {}

    allowed = comment_event(tmp_path, f"Thanks.\n/kforge ack k@{sha} the fp32 accumulation is needed", "ada",
                            "COLLABORATOR", 7)
    proc = cli("ack", "--from-event", cwd=repos.clone, env=env_for(fake, allowed))
    assert proc.returncode == 0, proc.stderr
    store.fetch()
    [ack] = acks_of(store.read()).values()
    assert ack["by"] == "ada" and ack["reason"] == "the fp32 accumulation is needed"
    assert ack["via"].startswith("comment on #7")
    [reply] = fake.comments_on(REPO, 7)
    assert "acknowledged" in reply.body and "@ada" not in reply.body
