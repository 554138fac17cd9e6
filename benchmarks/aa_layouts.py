"""A/A on the CPU in both process layouts (issue 38's split; issue 40's honesty): the same kernel from two checkout
folders, timed base against head by `evaluate`, alternating the split layout (base and head each in a worker of
their own, the default) with the one-worker layout before it. Prints one JSON line per evaluation: the verdict, the
speedup and its interval, the seconds, the load. An honest A/A interval holds 1.0.

    python benchmarks/aa_layouts.py --rounds 3                 # 3 evaluations of each layout, alternating
    OMP_WAIT_POLICY=ACTIVE python benchmarks/aa_layouts.py     # the workers' OpenMP threads spinning (before)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from gate_decision_cost import BASE_KERNEL, checkout  # noqa: E402

from kforge_bot.config.policy import load_policy  # noqa: E402
from kforge_bot.evaluate.api import evaluate  # noqa: E402
from kforge_bot.gate.base_spec import judged_spec  # noqa: E402
from kforge_bot.gate.measure import gate_settings  # noqa: E402
from kforge_bot.kernelspec import kernel_implementation, load_spec  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timing-budget-s", type=float, default=None, help="default: the default policy's")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kforge-aa-layouts-"))
    try:
        base = load_spec(checkout(work / "base", BASE_KERNEL, "cpu") / "kforge.yaml", "k")
        head = load_spec(checkout(work / "head", BASE_KERNEL, "cpu") / "kforge.yaml", "k")
        policy = load_policy(None)
        settings = gate_settings(policy, policy.rule_for("k", "k.py", "cpu"), args.timing_budget_s)
        spec = judged_spec(head, base)
        for _ in range(args.rounds):
            for one_worker in (False, True):
                started = time.monotonic()
                r = evaluate(spec, kernel_implementation(head), "cpu", settings, baseline=kernel_implementation(base),
                             one_worker=one_worker)
                print(json.dumps({"layout": "one worker" if one_worker else "split", "verdict": r.verdict,
                                  "speedup": r.speedup and round(r.speedup, 4),
                                  "ci": r.speedup_ci and [round(x, 4) for x in r.speedup_ci],
                                  "s": round(time.monotonic() - started, 1), "reason": (r.reason or "")[:160],
                                  "load_1m": round(os.getloadavg()[0], 2),
                                  "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(default: PASSIVE)")}),
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
