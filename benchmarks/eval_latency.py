"""How long one `evaluate()` takes end to end, and one `kforge-bot optimize` iteration, on this machine.

Every evaluation in the loop gets fresh seeds, so it computes the reference afresh (one child process)
and then runs the candidate (another): process start, importing torch, building, checking and timing.
This script times that wall clock for the bundled CPU kernel (the kernel against itself), `--runs` times
with the loop's quick settings, then a one-iteration `optimize` through the CLI. Point `--repo` at another
checkout (e.g. a `git worktree` of an older commit) to compare harness versions on the same machine.

    python benchmarks/eval_latency.py --runs 5 --json out.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from kforge_bot.targets import cpu_model  # noqa: E402

_EVALUATE = r"""
import json, sys, time
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import load_manifest
spec = load_manifest(sys.argv[1])[sys.argv[2]]
settings = EvalSettings(seeds=2, timing_budget_s=2.0, timeout_s=300.0)  # kforge_bot.optimize.run.quick_settings()
walls = []
for _ in range(int(sys.argv[3])):
    started = time.monotonic()
    result = evaluate(spec, spec.baseline, "cpu", settings)
    walls.append(time.monotonic() - started)
    assert result.verdict == "pass", result.reason
print("KFORGE_WALLS " + json.dumps(walls), flush=True)
"""


def _env(repo: Path, cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KFORGE_MODEL"))}
    env["PYTHONPATH"] = str(repo)
    env["KFORGE_CACHE_DIR"] = cache
    return env


def measure(repo: Path, runs: int, kernel: str) -> dict[str, object]:
    manifest = repo / "examples" / "kforge.yaml"
    cache = tempfile.mkdtemp(prefix="kforge-latency-cache-")
    try:
        proc = subprocess.run([sys.executable, "-c", _EVALUATE, str(manifest), kernel, str(runs)], cwd=str(repo),
                              env=_env(repo, cache), capture_output=True, text=True, check=True)
        walls = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("KFORGE_WALLS "))
                           .split(" ", 1)[1])
        report = Path(tempfile.mkdtemp(prefix="kforge-latency-report-"))
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "kforge_bot.cli", "optimize", str(manifest), "--kernel", kernel,
                        "--iterations", "1", "--report", str(report / "r"), "--no-cache"], cwd=str(repo),
                       env=_env(repo, cache), capture_output=True, text=True, check=True)
        optimize_s = time.monotonic() - started
        shutil.rmtree(report, ignore_errors=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(repo), capture_output=True,
                            text=True).stdout.strip()
    return {"repo": str(repo), "commit": commit, "evaluate_walls_s": [round(w, 3) for w in walls],
            "evaluate_median_s": round(statistics.median(walls), 3), "optimize_one_iteration_s": round(optimize_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", type=Path, help="a checkout to measure (repeatable); "
                        "default: this one")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--kernel", default="matmul_bias_relu_cpu")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    rows = [measure(repo.resolve(), args.runs, args.kernel) for repo in (args.repo or [HERE.parent])]
    out = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
           "cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(), "kernel": args.kernel,
           "runs": args.runs, "results": rows}
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
