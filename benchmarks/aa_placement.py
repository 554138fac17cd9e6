"""Why does an A/A run of KernelBench's LayerNorm (level 1, 40) read 1.011x? A diagnosis outside the harness.

    python benchmarks/aa_placement.py [--pairs 60] [--json FILE]

Two LayerNorm((64, 256, 256)) instances with the same weights, on one 16x64x256x256 fp32 input set,
timed in interleaved pairs (order alternating, 256 MB L2 flush before each call, CUDA events), as the
harness does. Four arrangements, each reported as the median per-pair ratio time(A) / time(B):
- separate: A and B are two instances (what an A/A evaluation has);
- swapped: the same two instances with their roles exchanged: a ratio that flips past 1.0 says the
  difference follows the instance (where its parameters sit in memory), not the harness's order;
- same: A and B are one instance: the harness's order and flushing alone (must read 1.000);
- moved: B's parameters copied into fresh allocations between rounds: whether placement moves the ratio.
Then the harness's own loop (`measure_pair`, three rotated input sets, the worker's untimed work after each
sample): `harness_*` rows give the speedup and interval for one instance on both sides and for two, with the
worker's hooks (the candidate's timed outputs kept, the baseline's copies dropped) and with symmetric ones.
"""

from __future__ import annotations

import argparse
import json
import statistics
from datetime import datetime, timezone
from pathlib import Path

import torch

from kforge_bot.evaluate.wire.timing import measure_pair
from kforge_bot.evaluate.wire.stats import speedup_from_pairs
from kforge_bot.targets import make_target


def _time(fn, x, flush) -> float:
    flush.zero_()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn(x)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def _ratio(a, b, x, flush, pairs: int) -> float:
    ratios = []
    with torch.no_grad():
        for _ in range(3):
            a(x), b(x)
        for p in range(pairs):
            if p % 2 == 0:
                ta, tb = _time(a, x, flush), _time(b, x, flush)
            else:
                tb, ta = _time(b, x, flush), _time(a, x, flush)
            ratios.append(ta / tb)
    return statistics.median(ratios)


def _harness(a, b, sets, keep_baseline: bool, budget_s: float) -> dict:
    """A/A through the harness's timing loop with the worker's untimed work after each sample."""
    target = make_target("cuda")
    kept_c: dict = {}
    kept_b: dict = {}

    def poison(outs):
        for o in outs:
            o.fill_(float("nan"))

    def after_b(out, index):
        copies = [out.clone()]
        if keep_baseline:
            kept_b[index] = copies
        del copies
        poison([out])

    def after_c(out, index):
        kept_c[index] = [out.clone()]
        poison([out])

    with torch.no_grad():
        t = measure_pair(target, lambda i: a(i[0]), lambda i: b(i[0]), sets, timing_budget_s=budget_s,
                         target_precision=0.0005, min_pairs=10, max_pairs=400, confidence=0.95, warmup_ms=200,
                         after_baseline=after_b, after_candidate=after_c)
    speedup, ci = speedup_from_pairs(t.baseline_ms, t.candidate_ms, 0.95)
    return {"speedup": round(speedup, 4), "ci": [round(ci[0], 4), round(ci[1], 4)], "pairs": len(t.baseline_ms)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--budget", type=float, default=4.0, help="seconds per harness arrangement")
    args = parser.parse_args()
    torch.manual_seed(0)
    shape = (64, 256, 256)
    x = torch.rand(16, *shape, device="cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    a = torch.nn.LayerNorm(shape).cuda()
    b = torch.nn.LayerNorm(shape).cuda()
    b.load_state_dict(a.state_dict())
    rows = {"separate": _ratio(a, b, x, flush, args.pairs), "swapped": _ratio(b, a, x, flush, args.pairs),
            "same": _ratio(a, a, x, flush, args.pairs)}
    moved = []
    for _ in range(4):
        with torch.no_grad():
            b.weight.data = b.weight.data.clone()
            b.bias.data = b.bias.data.clone()
        moved.append(_ratio(a, b, x, flush, args.pairs // 2))
    rows["moved"] = moved
    sets = [[torch.rand(16, *shape, device="cuda")] for _ in range(3)]
    c = torch.nn.LayerNorm(shape).cuda()
    c.load_state_dict(a.state_dict())
    for name, (first, second, keep) in {"harness_same_worker_hooks": (a, a, False),
                                        "harness_two_worker_hooks": (a, c, False),
                                        "harness_two_swapped_worker_hooks": (c, a, False),
                                        "harness_two_symmetric_hooks": (a, c, True),
                                        "harness_same_symmetric_hooks": (a, a, True)}.items():
        rows[name] = _harness(first, second, sets, keep, args.budget)
        print(name, rows[name], flush=True)
    data = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "pairs": args.pairs, "ratios": rows,
            "pointers": {"a.weight": a.weight.data_ptr() % (1 << 21), "b.weight": b.weight.data_ptr() % (1 << 21)}}
    print(json.dumps(data, indent=1))
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
