"""What held-out shapes and values (kforge_bot.evaluate.wire.heldout) add to one `check`: seconds per evaluation.

Runs `evaluate()` as `check` does (timing on, check's default settings) with held-out variants on and off,
alternating, `--runs` times per problem, on one problem of each format (KernelBench, manifest, GPU MODE) the repository
carries, A/A (the kernel against itself). Reports the median wall time of each, the difference, and the reference
worker's own time on the variants (phases.reference_worker.heldout_s).

    python benchmarks/heldout_cost.py --runs 5 --target cpu --json benchmarks/results/heldout_cost_cpu.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from kforge_bot.evaluate.api import evaluate  # noqa: E402
from kforge_bot.evaluate.wire.result import EvalSettings  # noqa: E402
from kforge_bot.kernelspec import load_spec  # noqa: E402
from kforge_bot.targets import cpu_model  # noqa: E402

PROBLEMS = {
    "kernelbench": (HERE.parent / "tests" / "data" / "kb" / "softmax.py", None),
    "manifest": (HERE.parent / "tests" / "data" / "manifest_repo" / "kforge.yaml", "rmsnorm"),
    "gpumode": (HERE.parent / "tests" / "data" / "gpumode" / "scaled_add_py", None),
}


def one(spec, settings: EvalSettings, target: str) -> dict:
    started = time.monotonic()
    result = evaluate(spec, spec.baseline, target, settings)
    wall = time.monotonic() - started
    phases = result.details.get("phases") or {}
    return {"verdict": result.verdict, "wall_s": round(wall, 3),
            "heldout_reference_s": (phases.get("reference_worker") or {}).get("heldout_s"),
            "correctness_s": (phases.get("candidate_worker") or {}).get("correctness_s"),
            "heldout": (result.correctness or {}).get("heldout")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--formats", default=",".join(PROBLEMS))
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    base = EvalSettings(isolation=os.environ.get("KFORGE_ISOLATION", "preferred"))
    rows = {}
    for fmt in args.formats.split(","):
        path, kernel = PROBLEMS[fmt]
        spec = load_spec(path, kernel)
        runs: dict[str, list[dict]] = {"on": [], "off": []}
        for i in range(args.runs):
            for mode in (("on", "off") if i % 2 == 0 else ("off", "on")):
                runs[mode].append(one(spec, replace(base, heldout=mode == "on"), args.target))
        on = statistics.median(r["wall_s"] for r in runs["on"])
        off = statistics.median(r["wall_s"] for r in runs["off"])
        rows[fmt] = {"problem": str(path.relative_to(HERE.parent)), "kernel": kernel, "median_on_s": on,
                     "median_off_s": off, "added_s": round(on - off, 3), "added_fraction": round((on - off) / off, 4),
                     "verdicts": sorted({r["verdict"] for m in runs.values() for r in m}),
                     "heldout_reference_s": [r["heldout_reference_s"] for r in runs["on"]], "runs": runs}
        print(f"{fmt}: on {on:.2f} s, off {off:.2f} s, added {on - off:+.2f} s ({(on - off) / off:+.1%}); "
              f"verdicts {rows[fmt]['verdicts']}", flush=True)
    report = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": platform.node(),
              "cpu": cpu_model(), "cores": os.cpu_count(), "target": args.target, "runs": args.runs,
              "settings": "check's defaults (timing on), A/A, held-out on and off alternating", "results": rows}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
