"""The Actions environment of a step, read in one place."""

from __future__ import annotations

from kforge_bot.github.actions import DEFAULT_API_URL, Actions


def test_a_step_s_environment_is_read_with_its_addresses() -> None:
    actions = Actions.read({"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "o/r", "GITHUB_SERVER_URL": "https://g.x/",
                            "GITHUB_RUN_ID": "7", "GITHUB_TOKEN": "ghs_secret", "GITHUB_EVENT_NAME": "pull_request"})
    assert actions.running and actions.can_post and actions.api == DEFAULT_API_URL
    assert actions.run_url == "https://g.x/o/r/actions/runs/7" and actions.commits_url == "https://g.x/o/r/commit"
    assert actions.missing("event_name", "event_path", "repository") == ["GITHUB_EVENT_PATH"]
    assert "ghs_secret" not in repr(actions)


def test_outside_actions_nothing_is_set_and_no_address_is_made() -> None:
    actions = Actions.read({"GITHUB_ACTIONS": "false", "GITHUB_RUN_ID": "7", "GITHUB_TOKEN": "t"})
    assert not actions.running and not actions.can_post and actions.run_url is None and actions.commits_url is None
