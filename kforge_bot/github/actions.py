"""What GitHub Actions tells a step through its environment, read in this one place: whether it runs under Actions,
the event, the repository, the API and web addresses, the run, the step summary file and the token."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_API_URL = "https://api.github.com"
# field -> the variable Actions sets it from
VARIABLES = {
    "event_name": "GITHUB_EVENT_NAME",
    "event_path": "GITHUB_EVENT_PATH",
    "repository": "GITHUB_REPOSITORY",
    "api_url": "GITHUB_API_URL",
    "workspace": "GITHUB_WORKSPACE",
    "step_summary": "GITHUB_STEP_SUMMARY",
    "server_url": "GITHUB_SERVER_URL",
    "run_id": "GITHUB_RUN_ID",
    "token": "GITHUB_TOKEN",
}
RUNNING = "GITHUB_ACTIONS"


@dataclass(frozen=True)
class Actions:
    """A step's Actions environment: each field "" where its variable is unset or empty (the token is kept out of
    repr). `running`: GITHUB_ACTIONS is "true", which Actions sets on every step."""

    running: bool = False
    event_name: str = ""
    event_path: str = ""
    repository: str = ""
    api_url: str = ""
    workspace: str = ""
    step_summary: str = ""
    server_url: str = ""
    run_id: str = ""
    token: str = field(default="", repr=False)

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> Actions:
        env = os.environ if environ is None else environ
        return cls(running=env.get(RUNNING) == "true", **{name: env.get(var) or "" for name, var in VARIABLES.items()})

    def missing(self, *names: str) -> list[str]:
        """The variables behind the named fields that are not set, in the order asked."""
        return [VARIABLES[name] for name in names if not getattr(self, name)]

    @property
    def api(self) -> str:
        return self.api_url or DEFAULT_API_URL

    @property
    def can_post(self) -> bool:
        """Whether the step may write to the repository through the API: a token and the repository's name."""
        return bool(self.token and self.repository)

    @property
    def run_url(self) -> str | None:
        """The web page of this workflow run, where Actions says which it is."""
        if self.server_url and self.repository and self.run_id:
            return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"
        return None

    @property
    def commits_url(self) -> str | None:
        """The repository's commits' web address (a commit's is this, '/', its sha)."""
        if self.server_url and self.repository:
            return f"{self.server_url.rstrip('/')}/{self.repository}/commit"
        return None

