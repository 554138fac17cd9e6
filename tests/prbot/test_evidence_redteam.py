"""Red team: the follow-up PR's title, also its commit's message (kforge_bot/prbot/evidence.py::render_title). A
kernel's name is the pull request's writing (letters, digits, '.', '_', '-'), and GitHub links `GH-12` (an issue)
and a run of 7 to 40 hex digits (a commit) in a title and a commit message: a cross-reference the bot would write on
an issue the PR's author picks. markdown_text quotes both in bodies (tests/test_text.py); the title carries the
name as written."""

from __future__ import annotations

import pytest

from kforge_bot.prbot import evidence
from kforge_bot.prbot.evidence import KernelEvidence, TargetRow


@pytest.mark.parametrize("name", ["GH-1", "deadbeef1"])
def test_a_kernel_name_github_links_is_quoted_in_the_follow_up_title(name: str) -> None:
    outcome = KernelEvidence(kernel=name, file=f"kernels/{name}.py",
                             targets=(TargetRow("b200", speedup=1.8, ci_low=1.7, ci_high=1.9, correct=True),))
    title = evidence.render_title(outcome)
    assert name not in title.replace(f"`{name}`", ""), title
