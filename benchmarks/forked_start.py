"""What forking a sandboxed CPU worker from the forkserver saves (issue 41), side by side in one run.

Evaluates one small correct candidate (tests/data/adversarial/problem.py's softmax; correctness only, no timing,
so the evaluation is mostly its workers' starts), alternating fresh workers (`KFORGE_FORKSERVER=0`: bubblewrap
starts a new interpreter that imports torch) and forked ones (the default), and prints for each evaluation its wall
time, the machine's CPU seconds spent meanwhile (/proc/stat: every process, the workers and the forkserver too) and
the candidate worker's start (`details.phases.candidate_worker.boot`). The forkserver's own start (it imports torch
once) falls in the first forked evaluation, which is reported apart. Run on an otherwise idle machine:

    python benchmarks/forked_start.py --rounds 10
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kforge_bot.evaluate.api import evaluate  # noqa: E402
from kforge_bot.evaluate.wire.result import EvalSettings  # noqa: E402
from kforge_bot.kernelspec import Implementation, load_spec  # noqa: E402

PROBLEM = REPO / "tests" / "data" / "adversarial" / "problem.py"
SOFTMAX = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True)
'''


def _cpu_seconds() -> float:
    """Every core's user and system time so far (/proc/stat's first line, in clock ticks)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system = (int(v) for v in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def one(mode: str) -> dict[str, float]:
    os.environ["KFORGE_FORKSERVER"] = mode
    spec = load_spec(PROBLEM)
    candidate = Implementation(SOFTMAX, "ModelNew", "candidate.py", str(PROBLEM.parent))
    settings = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=120, isolation="required")
    cpu, wall = _cpu_seconds(), time.monotonic()
    result = evaluate(spec, candidate, "cpu", settings, seeds=[3, 4])
    wall, cpu = time.monotonic() - wall, _cpu_seconds() - cpu
    if result.verdict != "pass":
        raise SystemExit(f"{mode or 'forked'}: {result.verdict}: {result.reason}")
    boot = result.details["phases"]["candidate_worker"]["boot"]
    return {"wall_s": wall, "cpu_s": cpu, "boot_s": boot["boot_s"], "torch_import_s": boot["torch_import_s"],
            "forked": bool(boot.get("forked"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print(f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    one("0")  # this process's own imports and caches warm, outside the figures
    first = one("")
    print(f"first forked evaluation (the forkserver's start in it): wall {first['wall_s']:.2f} s, "
          f"cpu {first['cpu_s']:.2f} s")
    rows: dict[str, list[dict[str, float]]] = {"fresh": [], "forked": []}
    for i in range(args.rounds):
        for name, mode in (("fresh", "0"), ("forked", "")) if i % 2 == 0 else (("forked", ""), ("fresh", "0")):
            row = one(mode)
            assert row["forked"] == (name == "forked"), row
            rows[name].append(row)
            print(f"round {i} {name:6}: wall {row['wall_s']:.2f} s, machine cpu {row['cpu_s']:.2f} s, candidate worker "
                  f"boot {row['boot_s']:.3f} s (torch import {row['torch_import_s']:.3f} s)")
    for name, got in rows.items():
        print(f"{name:6} median over {len(got)}: wall {statistics.median(r['wall_s'] for r in got):.2f} s, machine cpu "
              f"{statistics.median(r['cpu_s'] for r in got):.2f} s, candidate worker boot "
              f"{statistics.median(r['boot_s'] for r in got):.3f} s")
    ratio = [f["cpu_s"] / r["cpu_s"] for f, r in zip(rows["forked"], rows["fresh"])]
    print(f"forked / fresh machine cpu, per round: median {statistics.median(ratio):.2f} "
          f"({min(ratio):.2f}-{max(ratio):.2f})")


if __name__ == "__main__":
    main()
