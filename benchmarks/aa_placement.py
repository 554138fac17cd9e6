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
"""

from __future__ import annotations

import argparse
import json
import statistics
from datetime import datetime, timezone
from pathlib import Path

import torch


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--json", type=Path, default=None)
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
    data = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "pairs": args.pairs, "ratios": rows,
            "pointers": {"a.weight": a.weight.data_ptr() % (1 << 21), "b.weight": b.weight.data_ptr() % (1 << 21)}}
    print(json.dumps(data, indent=1))
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
