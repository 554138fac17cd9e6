"""The change-point rule's false alarms on A/A histories, and ruptures against E-Divisive on the same data.

An A/A history: a git repository of 30 commits where only a notes file changes; its one CPU kernel (the noisy kernel
of tests/fakes/history_repos.py: redundant torch work with up to 10% more at random per call) has 50 shape sets, so
tracking the 30 commits gives 50 series of 30 points, each point a real measurement (interleaved pairs against the
reference, the harness's interval). Whatever the rule reports there is a false alarm.

Each commit is tracked as `kforge-bot track` tracks it (kforge_bot.history.track.track_commit, appended to the
repository's history with append_record), one evaluation per commit for all 50 shape sets: the cost of a commit is
the harness's fixed per-shape-set work (warm-up, at least `min_pairs` pairs, a cache flush before every sample), not
the timing budget, so 50 sets cost about 50 times one. The conditions of every timed shape set are kept, with what
the harness's default disturbance limits would make of them: `--keep-disturbed` opens the limits (policy
evaluation.disturbance at 1.0) so a loaded shared machine still yields its points, marked.

Then the same series with a step injected at commit 15 (the measured values after it multiplied by 1.06 or 1.25):
how often each detector finds it, at the right commit (+-1). Detectors: the history's rule (ruptures PELT, the
policy's threshold; kforge_bot.history.changes) and MongoDB's E-Divisive (signal-processing-algorithms, in a venv of
its own, given by --spa-python; the same threshold applied to its change points).

    python benchmarks/history_false_alarms.py --out benchmarks/results [--spa-python /tmp/spa/bin/python]

Results: <out>/history_false_alarms_<target>.json (machine, date, conditions), rewritten after every commit.
On the H200: `--target cuda` (the kernel's torch work on the GPU).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
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
from kforge_bot import gitops  # noqa: E402
from kforge_bot.commands.track import choose_target  # noqa: E402
from kforge_bot.config.policy import load_policy_from_base  # noqa: E402
from kforge_bot.evaluate.api import evaluate  # noqa: E402
from kforge_bot.evaluate.wire.conditions import disturbance  # noqa: E402
from kforge_bot.history.changes import change_points  # noqa: E402
from kforge_bot.history.series import Point, Series, build_series, main_line  # noqa: E402
from kforge_bot.history.runner import probe_runner  # noqa: E402
from kforge_bot.history.store import Store  # noqa: E402
from kforge_bot.history.track import append_record, track_commit  # noqa: E402

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


OPEN_LIMITS = "disturbance: {preempted_share: 1.0, preempted_gap: 1.0, crowded_share: 1.0}, "


def aa_repo(root: Path, commits: int, reps: int, target: str, budget: float, sizes: list[int],
            keep_disturbed: bool) -> None:
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
                              f"evaluation: {{{OPEN_LIMITS if keep_disturbed else ''}seeds: 1, "
                              f"timing_budget_s: {budget}, timeout_s: 900}}\n")
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
    values = [p.value for p in series.points]
    bounds = [0, *cuts, len(values)]
    out = []
    for i, cut in enumerate(cuts):
        size = statistics.median(values[cut:bounds[i + 2]]) / statistics.median(values[bounds[i]:cut]) - 1
        if abs(size) > series.threshold:
            out.append(cut)
    return out


def track_aa(repo: Path, target: str, log: dict, newest_first: bool = False) -> None:
    """Track every commit of the A/A repository not yet in its history, one evaluation each, as `kforge-bot track`
    does; each shape set's timing conditions go to `log` with the default limits' verdict on them."""
    policy = load_policy_from_base(repo, gitops.resolve(repo, "HEAD"), str(repo / "policy.yml"))
    choice = choose_target(target)
    runner = probe_runner(choice.device_kind())
    store = Store(repo)
    done = {path.rsplit("/", 1)[-1].removesuffix(".json") for path in store.read() if path.startswith("results/")}
    commits = gitops.run_git(repo, "rev-list", "--reverse", "HEAD", what="list").split()
    order = list(enumerate(commits))
    for i, sha in reversed(order) if newest_first else order:
        if sha in done:
            continue
        seen: dict = {}

        def kept(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            seen["result"] = evaluate(*args, **kwargs)
            return seen["result"]

        started = time.time()
        record = track_commit(repo, sha, runner, policy, target=choice, evaluator=kept)
        store.update(lambda files, r=record: append_record(files, runner, r), f"track {sha[:12]}")
        result = seen.get("result")
        per_shape = (result.details.get("conditions") or {}).get("per_shape", []) if result else []
        log["commits"].append({
            "index": i, "commit": sha, "wall_s": round(time.time() - started, 1), "load_average": os.getloadavg(),
            "status": [k["status"] for k in record["kernels"]],
            "default_limits_disturbed": sum(1 for c in per_shape if disturbance(c)),
            "shape_sets": len(per_shape),
            "preempted_share_median": statistics.median(max(c["baseline"].get("preempted_share", 0),
                                                            c["candidate"].get("preempted_share", 0))
                                                        for c in per_shape) if per_shape else None,
            "crowded_share_median": statistics.median(max(c["baseline"].get("crowded_share", 0),
                                                          c["candidate"].get("crowded_share", 0))
                                                      for c in per_shape) if per_shape else None})
        print(json.dumps(log["commits"][-1]), flush=True)


def analyse(repo: Path, spa_python: str | None) -> dict:
    series = build_series(Store(repo).read(), main_line(repo))
    series = [s for s in series if s.part.startswith("shape set")]
    aa = {s.part: [c.to_dict() for c in change_points(s)] for s in series}
    found = {}
    for step in STEPS:
        hits = [[c.index for c in change_points(stepped(s, step))] for s in series]
        found[f"{step:.0%}"] = {"exact_or_adjacent": sum(1 for h in hits if any(abs(i - AT) <= 1 for i in h)),
                                "other_alarms": sum(1 for h in hits for i in h if abs(i - AT) > 1),
                                "alarms": sum(len(h) for h in hits)}
    spa = None
    if spa_python:
        spa_started = time.time()
        aa_cuts = spa_points(spa_python, series)
        spa = {"aa_series_with_alarm": sum(1 for s, c in zip(series, aa_cuts) if spa_alarms(s, c)),
               "aa_alarms": sum(len(spa_alarms(s, c)) for s, c in zip(series, aa_cuts))}
        for step in STEPS:
            shifted = [stepped(s, step) for s in series]
            cuts = spa_points(spa_python, shifted)
            hits = [spa_alarms(s, c) for s, c in zip(shifted, cuts)]
            spa[f"{step:.0%}"] = {"exact_or_adjacent": sum(1 for h in hits if any(abs(i - AT) <= 1 for i in h)),
                                  "other_alarms": sum(1 for h in hits for i in h if abs(i - AT) > 1)}
        spa["seconds"] = round(time.time() - spa_started, 1)
    rupt_started = time.time()
    for s in series:
        change_points(s)
    noise = [statistics.pstdev([p.value for p in s.points]) / statistics.mean([p.value for p in s.points])
             for s in series if len(s.points) > 1]
    return {"series": len(series), "points": sorted({len(s.points) for s in series}), "threshold": THRESHOLD,
            "aa_series_with_alarm": sum(1 for v in aa.values() if v), "aa_alarms": sum(len(v) for v in aa.values()),
            "aa_alarm_details": {k: v for k, v in aa.items() if v}, "injected_step_at": AT, "rule": found,
            "rule_seconds_for_all_series": round(time.time() - rupt_started, 3), "e_divisive": spa,
            "relative_stdev": {"min": round(min(noise), 4), "median": round(statistics.median(noise), 4),
                               "max": round(max(noise), 4)} if noise else None}


def git_commit_of_harness() -> str:
    proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--spa-python", default=None, help="a Python with signal-processing-algorithms installed")
    parser.add_argument("--repo", type=Path, default=None,
                        help="an A/A repository made by an earlier run: its untracked commits are tracked, then all "
                             "are analysed")
    parser.add_argument("--target", default="cpu", help="cpu, or cuda (the H200 run)")
    parser.add_argument("--sets", type=int, default=len(SIZES), help="shape sets, i.e. series (at most 50)")
    parser.add_argument("--budget", type=float, default=5.0, help="seconds of timing per commit (all sets)")
    parser.add_argument("--keep-disturbed", action="store_true",
                        help="open the disturbance limits (a loaded shared machine), keeping each set's conditions")
    parser.add_argument("--name", default=None, help="results file suffix (default: the target)")
    parser.add_argument("--newest-first", action="store_true",
                        help="track from the last commit back (a second process on a clone of --repo, merged after)")
    parser.add_argument("--no-track", action="store_true",
                        help="with --repo: analyse the commits tracked so far, measure nothing more")
    args = parser.parse_args()
    repo = args.repo
    if repo is None:
        repo = Path(tempfile.mkdtemp(prefix="kforge-aa-")) / "repo"
        aa_repo(repo, args.commits, args.reps, args.target, args.budget, SIZES[:args.sets], args.keep_disturbed)
    print(f"repository: {repo}", flush=True)
    out = args.out / f"history_false_alarms_{args.name or args.target}.json"
    log: dict = {"started": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "machine": platform.node(), "cpu": platform.processor() or platform.machine(),
                 "cores": os.cpu_count(), "python": platform.python_version(),
                 "harness_commit": git_commit_of_harness(),
                 "target": args.target, "sets": args.sets, "budget_s": args.budget,
                 "keep_disturbed": args.keep_disturbed, "repository": str(repo), "commits": []}
    if args.repo is not None and out.exists():
        earlier = json.loads(out.read_text())
        log.update(started=earlier.get("started", log["started"]), commits=earlier.get("commits", []))
    args.out.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        out.write_text(json.dumps(log, indent=1) + "\n")

    class Saving(list):
        def append(self, item) -> None:  # noqa: ANN001
            super().append(item)
            save()

    log["commits"] = Saving(log["commits"])
    if not args.no_track:
        track_aa(repo, args.target, log, args.newest_first)
    log["commits"] = list(log["commits"])
    log["track_s"] = round(sum(c["wall_s"] for c in log["commits"]), 1)
    log["finished"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    log["load_average_at_end"] = os.getloadavg()
    log.update(analyse(repo, args.spa_python))
    save()
    print(json.dumps({k: v for k, v in log.items() if k not in ("aa_alarm_details", "commits")}, indent=1))


if __name__ == "__main__":
    main()
