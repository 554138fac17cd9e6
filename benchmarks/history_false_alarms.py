"""The change-point rule's false alarms on A/A histories, and ruptures against E-Divisive on the same data.

An A/A history: a git repository of 30 commits where only a notes file changes; its one CPU kernel (the noisy kernel
of tests/fakes/history_repos.py: redundant torch work with up to 10% more at random per call) has 50 shape sets, so
one `kforge-bot track --range` over the 30 commits gives 50 series of 30 points, each point a real measurement
(interleaved pairs against the reference, the harness's interval). Whatever the rule reports there is a false alarm.

Then the same series with a step injected at commit 15 (the measured values after it multiplied by 1.06 or 1.25):
how often each detector finds it, at the right commit (+-1). Detectors: the history's rule (ruptures PELT, the
policy's threshold; kforge_bot.history.changes) and MongoDB's E-Divisive (signal-processing-algorithms, in a venv of
its own, given by --spa-python; the same threshold applied to its change points).

    python benchmarks/history_false_alarms.py --out benchmarks/results [--spa-python /tmp/spa/bin/python]

Results: <out>/history_false_alarms_<target>.json (machine, date, conditions).
On the H200: `--target cuda` (the kernel's torch work on the GPU).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fakes.gitrepos import commit_all, git, write  # noqa: E402
from fakes.history_repos import REFERENCE, kernel_source  # noqa: E402
from kforge_bot.history.changes import change_points  # noqa: E402
from kforge_bot.history.series import Point, Series, build_series, main_line  # noqa: E402
from kforge_bot.history.store import Store  # noqa: E402

SIZES = list(range(16, 116, 2))  # 50 shape sets
THRESHOLD = 0.03
STEPS = (0.06, 0.25)
AT = 15
SPA_SCRIPT = """
import json, sys, numpy as np
from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
out = []
for values in json.load(sys.stdin):
    out.append(sorted(int(i) for i in e_divisive(np.log(np.asarray(values)), pvalue=0.05, permutations=100)))
print(json.dumps(out))
"""


def aa_repo(root: Path, commits: int, reps: int, target: str, budget: float, sizes: list[int]) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    reference = REFERENCE.replace("WORK = 400", f"WORK = {reps}")
    if target != "cpu":
        reference = reference.replace("torch.randn(n, n), torch.randn(n, n)",
                                      f"torch.randn(n, n, device='{target}'), torch.randn(n, n, device='{target}')")
    write(root, "ref.py", reference)
    write(root, "noisy.py", kernel_source(reps))
    shapes = ", ".join(f"{{n: {n}}}" for n in sizes)
    write(root, "kforge.yaml", f"version: 1\nkernels:\n  noisy:\n    file: noisy.py\n    entry: kernel\n"
                               f"    reference: ref.py:reference\n    inputs: ref.py:make_inputs\n"
                               f"    shapes: [{shapes}]\n    targets: [{target}]\n")
    write(root, "policy.yml", f"version: 1\ngate: {{threshold: {THRESHOLD}, confidence: 0.95}}\n"
                              f"evaluation: {{seeds: 1, timing_budget_s: {budget}, timeout_s: 600}}\n")
    for i in range(commits):
        write(root, "NOTES.md", f"commit {i}\n")
        commit_all(root, f"commit {i}")


def stepped(series: Series, step: float) -> Series:
    s = Series(series.kernel, series.name, series.part, series.target, series.runner, series.unit, series.threshold)
    s.points = [Point(p.commit, p.subject, p.value * (1 + step if i >= AT else 1.0), p.ci, p.time_ms, p.reference_ms,
                      p.software) for i, p in enumerate(series.points)]
    return s


def spa_points(python: str, series: list[Series]) -> list[list[int]]:
    proc = subprocess.run([python, "-c", SPA_SCRIPT], input=json.dumps([[p.value for p in s.points] for s in series]),
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def spa_alarms(series: Series, cuts: list[int]) -> list[int]:
    """E-Divisive's change points past the threshold (median of the segments on each side, as the rule does)."""
    import statistics

    values = [p.value for p in series.points]
    bounds = [0, *cuts, len(values)]
    out = []
    for i, cut in enumerate(cuts):
        size = statistics.median(values[cut:bounds[i + 2]]) / statistics.median(values[bounds[i]:cut]) - 1
        if abs(size) > series.threshold:
            out.append(cut)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--spa-python", default=None, help="a Python with signal-processing-algorithms installed")
    parser.add_argument("--repo", type=Path, default=None, help="reuse an A/A repository already tracked")
    parser.add_argument("--target", default="cpu", help="cpu, or cuda (the H200 run)")
    parser.add_argument("--sets", type=int, default=len(SIZES), help="shape sets, i.e. series (at most 50)")
    parser.add_argument("--budget", type=float, default=5.0, help="seconds of timing per commit (all 50 sets)")
    args = parser.parse_args()
    started = time.time()
    repo = args.repo
    if repo is None:
        repo = Path(tempfile.mkdtemp(prefix="kforge-aa-")) / "repo"
        aa_repo(repo, args.commits, args.reps, args.target, args.budget, SIZES[:args.sets])
        first = git(repo, "rev-list", "--max-parents=0", "HEAD")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-m", "kforge_bot.cli", "track", "--rev", first, "--range",
                               f"{first}..HEAD", "--policy", "policy.yml", "--target", args.target], cwd=repo, env=env,
                              capture_output=True,
                              text=True)
        if proc.returncode != 0:
            sys.exit(f"track failed: {proc.stderr[-2000:]}")
    track_s = time.time() - started
    series = build_series(Store(repo).read(), main_line(repo))
    series = [s for s in series if s.part.startswith("shape set")]
    aa = {s.part: [c.to_dict() for c in change_points(s)] for s in series}
    found = {}
    for step in STEPS:
        hits = [[c.index for c in change_points(stepped(s, step))] for s in series]
        found[f"{step:.0%}"] = {"exact_or_adjacent": sum(1 for h in hits if any(abs(i - AT) <= 1 for i in h)),
                                "other_alarms": sum(1 for h in hits for i in h if abs(i - AT) > 1)}
    spa = None
    if args.spa_python:
        spa_started = time.time()
        aa_cuts = spa_points(args.spa_python, series)
        spa = {"aa_series_with_alarm": sum(1 for s, c in zip(series, aa_cuts) if spa_alarms(s, c)),
               "aa_alarms": sum(len(spa_alarms(s, c)) for s, c in zip(series, aa_cuts))}
        for step in STEPS:
            shifted = [stepped(s, step) for s in series]
            cuts = spa_points(args.spa_python, shifted)
            hits = [spa_alarms(s, c) for s, c in zip(shifted, cuts)]
            spa[f"{step:.0%}"] = {"exact_or_adjacent": sum(1 for h in hits if any(abs(i - AT) <= 1 for i in h)),
                                  "other_alarms": sum(1 for h in hits for i in h if abs(i - AT) > 1)}
        spa["seconds"] = round(time.time() - spa_started, 1)
    rupt_started = time.time()
    for s in series:
        change_points(s)
    data = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": platform.node(),
            "cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
            "load_average_at_end": os.getloadavg(), "series": len(series),
            "points": len(series[0].points) if series else 0, "threshold": THRESHOLD, "track_s": round(track_s, 1),
            "aa_series_with_alarm": sum(1 for v in aa.values() if v), "aa_alarms": sum(len(v) for v in aa.values()),
            "aa_alarm_details": {k: v for k, v in aa.items() if v}, "injected_step_at": AT, "rule": found,
            "rule_seconds_for_all_series": round(time.time() - rupt_started, 3), "e_divisive": spa,
            "noise": {s.part: round(float(__import__("statistics").pstdev([p.value for p in s.points])
                                          / __import__("statistics").mean([p.value for p in s.points])), 4)
                      for s in series[:5]}}
    args.out.mkdir(parents=True, exist_ok=True)
    data["target"] = args.target
    (args.out / f"history_false_alarms_{args.target}.json").write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps({k: v for k, v in data.items() if k != "aa_alarm_details"}, indent=1))
    print(f"repository: {repo}")


if __name__ == "__main__":
    main()
