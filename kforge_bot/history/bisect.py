"""`bisect`: the first commit between a good and a bad revision where a kernel regressed past its threshold.

Each step is the gate run between the good revision and one commit (kforge_bot.gate.run.run_gate, that kernel only,
measured even where its files did not change): the commit's kernel timed interleaved against the good one's, judged
under the good one's test with the policy's threshold, interval and confirmation run. A regression moves the bad
end down, a pass or improvement the good end up: about log2(commits) steps, plus one to check the bad end.

A commit that cannot be judged (it does not build, its kernel is incorrect or gone, or it changes the kernel's
test) is reported and left out, as `git bisect skip` does, never guessed through: when skipped commits sit next to
the answer, the result says the first bad commit is one of them or the one found. A step whose timing was
disturbed (`inconclusive`, the gate having measured it twice already) is the machine's, not the commit's: it is
measured once more before it is skipped, and every measurement is in `steps`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kforge_bot import gitops
from kforge_bot.config.policy import Policy
from kforge_bot.errors import KforgeError
from kforge_bot.gate.report import KernelReport
from kforge_bot.gate.run import run_gate
from kforge_bot.history.track import commit_facts

BAD = ("regression",)
GOOD = ("pass", "improved")
AGAIN = ("inconclusive",)  # a timing disturbed twice within the gate's run

Probe = Callable[[str], KernelReport | None]  # a commit -> the gate's report on the kernel there (None: absent)


@dataclass
class Step:
    commit: str
    subject: str
    verdict: str  # the gate's: regression, pass, improved, error, incorrect, spec-changed, skipped, absent
    change: str  # 'slower by 25.1% (23.0% to 27.3%)'-style, the gate's
    reason: str


@dataclass
class BisectResult:
    kernel: str
    good: str
    bad: str
    commits: int  # in good..bad
    status: str  # found | not-regressed | unresolved
    first_bad: str | None = None
    subject: str = ""
    change: str = ""
    candidates: list[str] = field(default_factory=list)  # with skipped neighbours: the first bad is one of these
    steps: list[Step] = field(default_factory=list)
    skipped: list[Step] = field(default_factory=list)

    @property
    def measurements(self) -> int:
        return len(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "measurements": self.measurements}


def commits_between(root: Path, good: str, bad: str) -> list[str]:
    """good..bad along the first parents, oldest first (bad last)."""
    out = gitops.run_git(root, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}",
                         what=f"cannot list the commits between {good[:12]} and {bad[:12]}")
    return out.split()


def gate_probe(root: Path, good: str, kernel: str, policy: Policy, *, target: str = "auto",
               timing_budget_s: float | None = None) -> Probe:
    """One bisection step: the gate between `good` and a commit, on `kernel` alone, without the result cache (each
    step is a fresh measurement)."""
    def probe(commit: str) -> KernelReport | None:
        report = run_gate(root, good, commit, policy=policy, all_kernels=True, target=target, use_cache=False,
                          timing_budget_s=timing_budget_s, only={kernel})
        return report.kernels[0] if report.kernels else None
    return probe


def bisect(root: Path, good: str, bad: str, kernel: str, probe: Probe) -> BisectResult:
    good_sha, bad_sha = gitops.resolve(root, good), gitops.resolve(root, bad)
    try:
        gitops.run_git(root, "merge-base", "--is-ancestor", good_sha, bad_sha, what="not an ancestor")
    except KforgeError:
        raise KforgeError(f"--good {good} is not an ancestor of --bad {bad}",
                          hint="give a good revision on the bad one's history (older first)") from None
    commits = commits_between(root, good_sha, bad_sha)
    result = BisectResult(kernel, good_sha, bad_sha, len(commits), "unresolved")
    if not commits:
        raise KforgeError(f"no commit between --good {good} and --bad {bad}", hint="give two different revisions")
    verdicts: dict[int, str] = {}

    def measure(commit: str) -> Step:
        report = probe(commit)
        step = Step(commit, commit_facts(root, commit)["subject"], report.verdict if report else "absent",
                    report.change if report else "n/a", report.reason if report else "the kernel is not there")
        result.steps.append(step)
        return step

    def judge(i: int) -> str:
        step = measure(commits[i])
        if step.verdict in AGAIN:  # the machine's state, not the commit's: one more measurement before a skip
            step = measure(commits[i])
        verdict = "bad" if step.verdict in BAD else "good" if step.verdict in GOOD else "skip"
        if verdict == "skip":
            result.skipped.append(step)
        verdicts[i] = verdict
        return verdict

    lo, hi = -1, len(commits) - 1  # commits[lo] good (-1: the good revision), commits[hi] bad once checked
    if judge(hi) != "bad":
        result.status = "not-regressed" if verdicts[hi] == "good" else "unresolved"
        return result
    while True:
        open_ = [i for i in range(lo + 1, hi) if i not in verdicts]
        if not open_:
            break
        middle = (lo + hi) / 2
        i = min(open_, key=lambda j: (abs(j - middle), j))
        verdict = judge(i)
        if verdict == "bad":
            hi = i
        elif verdict == "good":
            lo = i
    between = [commits[i] for i in range(lo + 1, hi) if verdicts.get(i) == "skip"]
    first = next(s for s in reversed(result.steps) if s.commit == commits[hi])
    result.first_bad, result.subject, result.change = first.commit, first.subject, first.change
    result.candidates = [*between, commits[hi]] if between else []
    result.status = "found" if not between else "unresolved"
    return result
