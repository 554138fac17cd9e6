"""The trust decision, on events parsed from real payloads."""

from __future__ import annotations

from kforge_bot.github import events, trust
from fakes.webhooks import as_fork, example, pr_comment


def _pr(action="opened", fork=False, labels=(), association=None, label_added=None):
    payload = example("pull_request", action)
    if fork:
        as_fork(payload)
    if association:
        payload["pull_request"]["author_association"] = association
    payload["pull_request"]["labels"] = [{"name": n} for n in labels]
    if label_added:
        payload["label"] = {"name": label_added}
    return events.parse_event("pull_request_target", payload)


def _pull(fork=False, labels=(), association="OWNER", number=1):
    payload = example("pull_request", "opened")
    if fork:
        as_fork(payload)
    pull = payload["pull_request"]
    pull["number"] = number
    pull["labels"] = [{"name": n} for n in labels]
    if not fork:
        pull["author_association"] = association
    return pull


def test_same_repo_owner_runs():
    d = trust.decide(_pr())
    assert d == (True, "same-repository PR by @Codertocat (OWNER)")
    allowed, reason = d  # a plain (allowed, reason) pair
    assert allowed


def test_fork_without_label_does_not_run():
    allowed, reason = trust.decide(_pr(fork=True))
    assert not allowed
    assert "fork PR from mallory/Hello-World by @mallory (FIRST_TIME_CONTRIBUTOR)" in reason
    assert "add the 'kforge:run' label" in reason


def test_fork_runs_when_a_maintainer_adds_the_label():
    allowed, reason = trust.decide(_pr("labeled", fork=True, labels=["kforge:run"], label_added="kforge:run"))
    assert allowed and "added the 'kforge:run' label" in reason


def test_fork_push_after_label_does_not_run():
    allowed, reason = trust.decide(_pr("synchronize", fork=True, labels=["kforge:run"]))
    assert not allowed and "new commits (synchronize)" in reason


def test_same_repo_member_fork_still_needs_label():
    ev = _pr(fork=True)
    member = events.PullRequestEvent(**{**ev.__dict__, "author_association": "MEMBER"})
    assert not trust.decide(member).allowed


def test_contributor_in_same_repo_needs_label():
    allowed, reason = trust.decide(_pr(association="CONTRIBUTOR"))
    assert not allowed and "lacks write access" in reason


def test_permission_and_association_must_both_hold():
    # A COLLABORATOR with read-only permission is not trusted; nor is a CONTRIBUTOR with write.
    allowed, reason = trust.decide(_pr(association="COLLABORATOR"), author_permission="read")
    assert not allowed and "@Codertocat (COLLABORATOR, read permission), who lacks write access" in reason
    assert not trust.decide(_pr(association="CONTRIBUTOR"), author_permission="write").allowed
    assert trust.decide(_pr(association="COLLABORATOR"), author_permission="write").allowed
    assert "(OWNER, admin permission)" in trust.decide(_pr(), author_permission="admin").reason


def test_policy_associations_and_forks():
    assert trust.decide(_pr(association="CONTRIBUTOR"),
                        trusted_associations=["OWNER", "CONTRIBUTOR"]).allowed
    assert not trust.decide(_pr(), trusted_associations=["MEMBER"]).allowed
    fork_by_member = events.PullRequestEvent(**{**_pr(fork=True).__dict__, "author_association": "MEMBER"})
    assert not trust.decide(fork_by_member).allowed
    allowed, reason = trust.decide(fork_by_member, allow_forks=True)
    assert allowed and "the policy allows forks" in reason
    assert not trust.decide(_pr(fork=True), allow_forks=True).allowed  # an untrusted fork still needs the label


def test_other_labels_do_not_start_runs():
    allowed, reason = trust.decide(_pr("labeled", labels=["bug"], label_added="bug"))
    assert not allowed and "label 'bug' added" in reason


def test_configurable_label():
    ev = _pr("labeled", fork=True, labels=["perf-ok"], label_added="perf-ok")
    assert trust.decide(ev, trigger_label="perf-ok").allowed
    assert not trust.decide(ev).allowed


def test_incomplete_event_fails_closed():
    ev = events.parse_event("issue_comment", pr_comment("/kforge optimize"))
    allowed, reason = trust.decide(ev)
    assert not allowed and "unknown" in reason


def test_comment_commands():
    maint = events.parse_event("issue_comment", pr_comment("/kforge retry", association="MEMBER", login="maint"))
    assert trust.decide(maint.with_pull(_pull())).allowed
    # The same command on a fork PR needs the label too.
    fork_pull = _pull(fork=True)
    assert not trust.decide(maint.with_pull(fork_pull)).allowed
    assert trust.decide(maint.with_pull(_pull(fork=True, labels=["kforge:run"]))).allowed

    outsider = events.parse_event("issue_comment", pr_comment("/kforge optimize", association="NONE", login="eve"))
    allowed, reason = trust.decide(outsider.with_pull(_pull()))
    assert not allowed and "@eve (NONE)" in reason
    # Write permission alone does not make a commenter trusted (association NONE).
    assert not trust.decide(outsider.with_pull(_pull()), sender_permission="write").allowed
    assert not trust.decide(maint.with_pull(_pull()), sender_permission="read").allowed


def test_stop_needs_a_maintainer_but_no_label():
    stop = events.parse_event("issue_comment", pr_comment("/kforge stop", association="OWNER"))
    allowed, reason = trust.decide(stop.with_pull(_pull(fork=True)))
    assert allowed and "runs nothing" in reason


def test_dispatch_of_a_labeled_fork_runs():
    payload = example("workflow_dispatch")
    payload["inputs"] = {"pr": "1"}
    payload["repository"]["full_name"] = "Codertocat/Hello-World"  # the example dispatches elsewhere
    ev = events.parse_event("workflow_dispatch", payload).with_pull(_pull(fork=True, labels=["kforge:run"]))
    assert trust.decide(ev).allowed
    ev = events.parse_event("workflow_dispatch", payload).with_pull(_pull(fork=True))
    assert not trust.decide(ev).allowed


def test_closed_pr_does_not_run():
    pull = {**_pull(), "state": "closed"}
    ev = events.parse_event("issue_comment", pr_comment("/kforge retry")).with_pull(pull)
    assert trust.decide(ev) == (False, "PR #1 is closed")
