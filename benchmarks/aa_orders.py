"""Issue 40: the raw pairs of real A/A evaluations on the CPU (benchmarks/aa_layouts.py's kernel and checkouts, the
one-worker layout unless --split), split by which side ran first in the pair. A tilt that depends on the order
shows as B-first and C-first ratios on opposite sides of 1 by unequal amounts; a tilt that favours one side
whatever the order shows as both above 1. Prints one JSON line per evaluation.

    python benchmarks/aa_orders.py --rounds 3 --timing-budget-s 3
    OMP_NUM_THREADS=1 python benchmarks/aa_orders.py --max-pairs 300 --timing-budget-s 8

`slots_ms`: each side's median sample in each place of its pair (B1: the base first, C2: the head after it, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from gate_decision_cost import BASE_KERNEL, checkout  # noqa: E402

from kforge_bot.config.policy import load_policy  # noqa: E402
from kforge_bot.evaluate import judge  # noqa: E402
from kforge_bot.evaluate.api import evaluate  # noqa: E402
from kforge_bot.evaluate.wire.stats import speedup_from_pairs  # noqa: E402
from kforge_bot.gate.base_spec import judged_spec  # noqa: E402
from kforge_bot.gate.measure import gate_settings  # noqa: E402
from kforge_bot.kernelspec import kernel_implementation, load_spec  # noqa: E402

CAPTURED: list[list[dict[str, Any]]] = []
_attach = judge._attach_timing


def _capturing(result: Any, timing: list[dict[str, Any]], *args: Any, **kwargs: Any) -> None:
    CAPTURED.append(timing)
    _attach(result, timing, *args, **kwargs)


judge._attach_timing = _capturing  # the parent's judge: the raw pairs the worker sent


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def by_order(b: list[float], c: list[float]) -> dict[str, Any]:
    """Pair i ran B first where i is even (evaluate.wire.timing.measure_pair)."""
    first_b = [x / y for i, (x, y) in enumerate(zip(b, c)) if i % 2 == 0]
    first_c = [x / y for i, (x, y) in enumerate(zip(b, c)) if i % 2 == 1]
    speedup, ci = speedup_from_pairs(b, c, 0.95)
    return {"speedup": round(speedup, 4), "ci": [round(x, 4) for x in ci], "pairs": len(b),
            "b_first_median": round(statistics.median(first_b), 4) if first_b else None,
            "c_first_median": round(statistics.median(first_c), 4) if first_c else None,
            "b_median_ms": round(statistics.median(b), 4), "c_median_ms": round(statistics.median(c), 4),
            "first_half": round(speedup_from_pairs(b[:len(b) // 2], c[:len(c) // 2])[0], 4) if len(b) > 1 else None,
            "second_half": round(speedup_from_pairs(b[len(b) // 2:], c[len(c) // 2:])[0], 4) if len(b) > 1 else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timing-budget-s", type=float, default=3.0)
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--max-pairs", type=int, default=0, help="default: the gate's")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kforge-aa-orders-"))
    try:
        base = load_spec(checkout(work / "base", BASE_KERNEL, "cpu") / "kforge.yaml", "k")
        head = load_spec(checkout(work / "head", BASE_KERNEL, "cpu") / "kforge.yaml", "k")
        policy = load_policy(None)
        settings = gate_settings(policy, policy.rule_for("k", "k.py", "cpu"), args.timing_budget_s)
        if args.max_pairs:
            settings = dataclasses.replace(settings, max_pairs=args.max_pairs)
        spec = judged_spec(head, base)
        for _ in range(args.rounds):
            started = time.monotonic()
            r = evaluate(spec, kernel_implementation(head), "cpu", settings, baseline=kernel_implementation(base),
                         one_worker=not args.split)
            row: dict[str, Any] = {"verdict": r.verdict, "reason": (r.reason or "")[:120],
                                   "s": round(time.monotonic() - started, 1), "load_1m": round(os.getloadavg()[0], 2),
                                   "threads": os.environ.get("OMP_NUM_THREADS", "(default)")}
            if CAPTURED and CAPTURED[-1]:
                t = CAPTURED[-1][0]
                row.update(by_order(t["baseline_ms"], t["candidate_ms"]), k=t.get("calls_per_sample"))
                row["busy_threads"] = {s: t["conditions"].get(s, {}).get("busy_threads") for s in ("baseline",
                                                                                                   "candidate")}
                b, c = t["baseline_ms"], t["candidate_ms"]
                # median ms of each slot: side and place in its pair (pair i runs B first where i is even)
                row["slots_ms"] = {"B1": _median(b[0::2]), "B2": _median(b[1::2]), "C1": _median(c[1::2]),
                                   "C2": _median(c[0::2])}
            print(json.dumps(row), flush=True)
            CAPTURED.clear()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
