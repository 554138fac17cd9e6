"""`bisect` on a real repository with a scripted probe (each step's gate report given, not measured): a step whose
timing was disturbed is measured once more before it is skipped, and both measurements are in the steps."""

from __future__ import annotations

from pathlib import Path

from fakes.gate_repos import init_repo
from fakes.gitrepos import commit_all, write
from kforge_bot.gate.report import KernelReport
from kforge_bot.history.bisect import bisect


def history(root: Path, commits: int) -> list[str]:
    init_repo(root)
    shas = []
    for i in range(commits):
        write(root, "NOTES.md", f"{i}\n")
        shas.append(commit_all(root, f"step {i}"))
    return shas


class Scripted:
    """The gate's verdict at each commit: regression from `first_bad` on, pass before it, and the listed verdicts
    first where `once` names a commit (the machine's state at that measurement)."""

    def __init__(self, shas: list[str], first_bad: int, once: dict[int, list[str]]) -> None:
        self.shas, self.first_bad = shas, first_bad
        self.pending = {shas[i]: list(v) for i, v in once.items()}
        self.calls: list[str] = []

    def __call__(self, commit: str) -> KernelReport:
        self.calls.append(commit)
        queued = self.pending.get(commit)
        verdict = queued.pop(0) if queued else \
            "regression" if self.shas.index(commit) >= self.first_bad else "pass"
        report = KernelReport("k", "k", "k.py", "function", verdict, f"scripted {verdict}")
        if verdict == "regression":
            report.speedup, report.speedup_ci = 0.5, [0.45, 0.55]
        return report


def test_a_disturbed_step_is_measured_again_not_skipped(tmp_path) -> None:
    shas = history(tmp_path / "repo", 6)
    probe = Scripted(shas, first_bad=4, once={3: ["inconclusive"]})
    result = bisect(tmp_path / "repo", shas[1], shas[5], "k", probe)
    assert result.status == "found" and result.first_bad == shas[4], result
    assert result.skipped == [] and probe.calls.count(shas[3]) == 2
    assert [s.verdict for s in result.steps if s.commit == shas[3]] == ["inconclusive", "pass"]
    assert result.measurements == len(probe.calls)


def test_a_step_disturbed_again_is_skipped_and_the_answer_says_so(tmp_path) -> None:
    shas = history(tmp_path / "repo", 6)
    probe = Scripted(shas, first_bad=4, once={4: ["inconclusive", "inconclusive"]})
    result = bisect(tmp_path / "repo", shas[1], shas[5], "k", probe)
    assert result.status == "unresolved" and result.candidates == [shas[4], shas[5]], result
    assert [s.commit for s in result.skipped] == [shas[4]] and probe.calls.count(shas[4]) == 2


def test_the_first_bad_commit_is_told_by_its_deciding_measurement(tmp_path) -> None:
    shas = history(tmp_path / "repo", 4)
    probe = Scripted(shas, first_bad=3, once={3: ["inconclusive"]})
    result = bisect(tmp_path / "repo", shas[0], shas[3], "k", probe)
    assert result.status == "found" and result.first_bad == shas[3]
    assert [s.verdict for s in result.steps] == ["inconclusive", "regression", "pass", "pass"]
    assert result.change == result.steps[1].change and "slower" in result.change
