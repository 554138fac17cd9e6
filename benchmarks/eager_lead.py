"""Eager timing of short kernels: does a sample time the device's work or the host's launches?

    python benchmarks/eager_lead.py [--json FILE]

y = 2x + 1 over 2^N fp32 values, as torch's two kernels (the reference) and as one (`torch.add(one, x,
alpha=2)`, the candidate), on CUDA, timed four ways in one process:
- `single_call`: events around one call queued right behind a cache flush (no host wait between them), the
  shape of KernelBench's loop: the host's launch hides behind the flush;
- `eager_fixed_lead`: kforge's `measure_pair` forced eager as it was before 2026-12-02: each sample's device lead
  the fixed ~50 us one-block spin (k calls a sample, the host issuing them while the device ran them);
- `eager_adaptive_lead`: as it is: the lead sized from the host's measured issue time (timing.LEAD_FACTOR),
  given as device-wide settle work (targets/cuda.py SETTLE_MS);
- `graph`: `measure_pair` as it runs (graph replays for calls under 1 ms).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kforge_bot.evaluate.wire import timing  # noqa: E402
from kforge_bot.targets import cuda as cuda_target  # noqa: E402
from kforge_bot.targets import make_target  # noqa: E402


def _single_call(fn, sets, trials: int, flush) -> float:
    times = []
    for trial in range(trials):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush()
        start.record()
        fn(sets[trial % len(sets)])
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times[2:])


def _pair(target, reference, candidate, sets, *, eager: bool, lead_factor: float, settle_ms: float | None = None) -> dict:
    saved = timing.GRAPH_BELOW_MS, timing.LEAD_FACTOR, cuda_target.SETTLE_MS
    timing.GRAPH_BELOW_MS = 0.0 if eager else saved[0]
    timing.LEAD_FACTOR = lead_factor
    cuda_target.SETTLE_MS = saved[2] if settle_ms is None else settle_ms
    try:
        r = timing.measure_pair(target, reference, candidate, sets, timing_budget_s=1.5, target_precision=0.003,
                                min_pairs=30, max_pairs=3000, confidence=0.95, warmup_ms=30,
                                after_baseline=lambda o, i: None, after_candidate=lambda o, i: None)
    finally:
        timing.GRAPH_BELOW_MS, timing.LEAD_FACTOR, cuda_target.SETTLE_MS = saved
    return {"reference_ms": statistics.median(r.baseline_ms), "candidate_ms": statistics.median(r.candidate_ms),
            "mode": r.launch, "calls_per_sample": r.calls_per_sample, "pairs": len(r.baseline_ms)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--sizes", default="20,22,24")
    args = parser.parse_args()
    target = make_target("cuda")
    rows = {}
    for n in (int(s) for s in args.sizes.split(",")):
        sets = [[torch.randn(1 << n, device="cuda")] for _ in range(3)]
        one = torch.ones(1 << n, device="cuda")

        def reference(i):
            return i[0] * 2 + 1

        def candidate(i, one=one):
            return torch.add(one, i[0], alpha=2)

        row = {"single_call": {"reference_ms": _single_call(reference, sets, 200, target.flush_cache),
                               "candidate_ms": _single_call(candidate, sets, 200, target.flush_cache)},
               "eager_fixed_lead": _pair(target, reference, candidate, sets, eager=True, lead_factor=0.0, settle_ms=0.0),
               "eager_adaptive_lead": _pair(target, reference, candidate, sets, eager=True, lead_factor=1.5),
               "graph": _pair(target, reference, candidate, sets, eager=False, lead_factor=1.5)}
        for label, r in row.items():
            r["speedup"] = r["reference_ms"] / r["candidate_ms"]
            print(f"2^{n:<3d} {label:20s} reference {r['reference_ms'] * 1000:8.1f} us  candidate "
                  f"{r['candidate_ms'] * 1000:8.1f} us  {r['speedup']:.3f}x  {r.get('mode', '')} k={r.get('calls_per_sample', 1)}",
                  flush=True)
        rows[f"2^{n}"] = row
    if args.json:
        args.json.write_text(json.dumps({"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                                         "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
