"""Event parsing, on real payloads from @octokit/webhooks-examples."""

from __future__ import annotations

import json

import pytest

from kforge_bot.github import events
from kforge_bot.errors import KforgeError
from kforge_bot.github.events import Ignored, PullRequestEvent
from fakes.webhooks import as_fork, example, pr_comment


def _write(tmp_path, payload, name="event.json"):
    path = tmp_path / name
    path.write_text(json.dumps(payload))
    return path


@pytest.mark.parametrize("action", ["opened", "synchronize", "reopened"])
def test_pull_request_actions(tmp_path, action):
    payload = example("pull_request", action)
    ev = events.load_event(_write(tmp_path, payload), "pull_request")
    pr = payload["pull_request"]
    assert isinstance(ev, PullRequestEvent) and ev.complete
    assert (ev.action, ev.number, ev.repository) == (action, payload["number"], "Codertocat/Hello-World")
    assert (ev.base_ref, ev.base_sha) == (pr["base"]["ref"], pr["base"]["sha"])
    assert (ev.head_ref, ev.head_sha, ev.head_repo) == (pr["head"]["ref"], pr["head"]["sha"], "Codertocat/Hello-World")
    assert ev.is_fork is False
    assert (ev.author, ev.author_association) == ("Codertocat", "OWNER")
    assert ev.labels == tuple(label["name"] for label in pr["labels"])
    assert ev.command is None and ev.label_added is None


def test_labeled_records_the_label(tmp_path):
    ev = events.load_event(_write(tmp_path, example("pull_request", "labeled")), "pull_request_target")
    assert ev.event_name == "pull_request_target" and ev.action == "labeled" and ev.label_added == "bug"
    assert "bug" in ev.labels


def test_fork_pr(tmp_path):
    ev = events.load_event(_write(tmp_path, as_fork(example("pull_request", "opened"))), "pull_request")
    assert ev.is_fork is True and ev.head_repo == "mallory/Hello-World"
    assert (ev.author, ev.author_association) == ("mallory", "FIRST_TIME_CONTRIBUTOR")


def test_deleted_fork_counts_as_fork(tmp_path):
    payload = example("pull_request", "synchronize")
    payload["pull_request"]["head"]["repo"] = None
    ev = events.parse_event("pull_request", payload)
    assert ev.is_fork is True and ev.head_repo is None


def test_other_pull_request_actions_are_ignored():
    ev = events.parse_event("pull_request", example("pull_request", "closed"))
    assert isinstance(ev, Ignored) and "closed" in ev.reason


@pytest.mark.parametrize("body,command", [
    ("/kforge optimize", "optimize"),
    ("/kforge", "optimize"),
    ("thanks!\n/kforge retry\n", "retry"),
    ("  /kforge STOP", "stop"),
])
def test_comment_commands(tmp_path, body, command):
    ev = events.load_event(_write(tmp_path, pr_comment(body, association="MEMBER", login="maint")), "issue_comment")
    assert isinstance(ev, PullRequestEvent)
    assert ev.command == command and ev.number == 1
    assert (ev.sender, ev.sender_association) == ("maint", "MEMBER")
    assert ev.author == "Codertocat"
    assert not ev.complete  # the payload has no refs: the PR must be looked up


def test_comment_without_command_or_on_an_issue_is_ignored():
    assert isinstance(events.parse_event("issue_comment", pr_comment("looks good")), Ignored)
    assert isinstance(events.parse_event("issue_comment", pr_comment("> /kforge stop\nno")), Ignored)
    plain = example("issue_comment", "created")  # the real example is on an issue
    plain["comment"]["body"] = "/kforge optimize"
    ev = events.parse_event("issue_comment", plain)
    assert isinstance(ev, Ignored) and "not a pull request" in ev.reason
    edited = pr_comment("/kforge retry")
    edited["action"] = "edited"
    assert isinstance(events.parse_event("issue_comment", edited), Ignored)


def test_unknown_command_is_ignored_with_the_known_ones():
    ev = events.parse_event("issue_comment", pr_comment("/kforge deploy"))
    assert isinstance(ev, Ignored) and "/kforge deploy" in ev.reason and "/kforge retry" in ev.reason


def test_workflow_dispatch(tmp_path):
    payload = example("workflow_dispatch")
    payload["inputs"] = {"pr": "42"}
    ev = events.load_event(_write(tmp_path, payload), "workflow_dispatch")
    assert (ev.number, ev.command, ev.repository) == (42, "optimize", payload["repository"]["full_name"])
    assert ev.sender == payload["sender"]["login"] and not ev.complete


def test_workflow_dispatch_without_pr_names_the_input(tmp_path):
    path = _write(tmp_path, example("workflow_dispatch"))  # the real example has inputs: {}
    with pytest.raises(KforgeError, match=r"event.json: workflow_dispatch has no input 'pr'"):
        events.load_event(path, "workflow_dispatch")
    payload = example("workflow_dispatch")
    payload["inputs"] = {"pr": "main"}
    with pytest.raises(KforgeError, match="not a pull request number"):
        events.parse_event("workflow_dispatch", payload)


def test_with_pull_completes_a_comment_event():
    ev = events.parse_event("issue_comment", pr_comment("/kforge retry", association="OWNER"))
    pull = example("pull_request", "opened")["pull_request"]
    pull = {**pull, "number": 1}
    done = ev.with_pull(pull)
    assert done.complete and done.head_sha == pull["head"]["sha"] and done.command == "retry"
    assert done.sender_association == "OWNER" and done.author_association == "OWNER"
    with pytest.raises(KforgeError, match="does not match"):
        ev.with_pull({**pull, "number": 2})


@pytest.mark.parametrize("mutate,missing", [
    (lambda p: p.pop("pull_request"), "pull_request"),
    (lambda p: p["pull_request"]["head"].pop("sha"), "pull_request.head.sha"),
    (lambda p: p["pull_request"]["base"].pop("ref"), "pull_request.base.ref"),
    (lambda p: p.pop("repository"), "repository"),
    (lambda p: p["pull_request"].pop("author_association"), "pull_request.author_association"),
    (lambda p: p["pull_request"]["user"].pop("login"), "pull_request.user.login"),
])
def test_malformed_pull_request_names_file_and_key(tmp_path, mutate, missing):
    payload = example("pull_request", "opened")
    mutate(payload)
    path = _write(tmp_path, payload)
    with pytest.raises(KforgeError) as info:
        events.load_event(path, "pull_request")
    text = str(info.value)
    assert text.startswith(f"{path}: ") and f"has no {missing}" in text and "\n" not in text


def test_wrong_types_and_bad_files(tmp_path):
    payload = example("pull_request", "opened")
    payload["pull_request"]["number"] = "2"
    with pytest.raises(KforgeError, match="pull_request.number has the wrong type"):
        events.parse_event("pull_request", payload)
    payload = example("pull_request", "opened")
    payload["pull_request"]["number"] = True
    with pytest.raises(KforgeError, match="wrong type"):
        events.parse_event("pull_request", payload)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(KforgeError, match=r"bad.json: event file is not valid JSON \(line 1"):
        events.load_event(bad, "pull_request")
    with pytest.raises(KforgeError, match="event file not found"):
        events.load_event(tmp_path / "nope.json", "pull_request")
    with pytest.raises(KforgeError, match="not a JSON object"):
        events.parse_event("pull_request", [1, 2])


def test_from_env(tmp_path):
    path = _write(tmp_path, example("pull_request", "opened"))
    ev = events.from_env({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(path)})
    assert ev.number == 2
    with pytest.raises(KforgeError, match="GITHUB_EVENT_PATH not set"):
        events.from_env({"GITHUB_EVENT_NAME": "pull_request"})


def test_unhandled_event_is_ignored():
    ev = events.parse_event("push", {"repository": {"full_name": "a/b"}})
    assert isinstance(ev, Ignored) and "not handled" in ev.reason


def test_base_repo_must_be_this_repository():
    payload = example("pull_request", "opened")
    payload["repository"]["full_name"] = "someone/else"
    with pytest.raises(KforgeError, match="not this repository someone/else"):
        events.parse_event("pull_request", payload)
