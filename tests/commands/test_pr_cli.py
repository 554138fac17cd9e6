"""`kforge-bot pr` before any work: outside GitHub Actions it is one line naming what is missing, exit 2, and no
results file (the bot end to end is tests/prbot/test_prbot.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _pr(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, "-m", "kforge_bot.cli", "pr", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env={**clean, **env})


def test_outside_actions_it_names_the_missing_variables(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    proc = _pr("--json", str(results), "--no-publish", env={})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "kforge-bot: error: GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, GITHUB_REPOSITORY not set (run inside GitHub "
        "Actions, or set them to an event name, a payload file and owner/name)"]
    assert not results.exists()


def test_an_event_file_that_is_missing_is_one_line(tmp_path: Path) -> None:
    proc = _pr("--no-publish", env={"GITHUB_EVENT_NAME": "pull_request", "GITHUB_REPOSITORY": "octo/kernels",
                                    "GITHUB_EVENT_PATH": str(tmp_path / "nope.json"), "GITHUB_TOKEN": "t"})
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "nope.json" in proc.stderr
