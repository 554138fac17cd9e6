"""Why kforge-bot and KernelBench read different speedups for one compiled kernel: both loops, one process.

    python benchmarks/agreement.py --kernelbench DIR --problem 1/40 [--json FILE]

On KernelBench's LayerNorm (level 1, 40) the torch.compile candidate's kernel measured 0.46-0.54 ms under
kforge-bot and 0.33-0.46 ms under KernelBench's harness in the same calls (separate processes, separate
compilations), while the eager reference agreed (8.3-8.4 ms). Here one compiled module and one eager
reference, on the same inputs, are timed by:
- `kb_one_set`: KernelBench's own `time_execution_with_cuda_event` (imported from the fetched checkout, L2
  cleared before each trial), on one input set, as its harness does;
- `kb_loop_rotating`: the same loop (KernelBench's `clear_l2_cache`, events around one call) cycling
  through three input sets;
- `kforge_one_set` / `kforge_rotating`: kforge-bot's `measure_pair` (paired, order alternating, its own
  cache flush and pre-start spin) on one and on three input sets.
So the rotation of inputs (and the TLB and DRAM-page state it implies) and the loop itself are told apart.
Runs 1-3 (2026-12-02) found the cause: the compiled kernel runs 20-75% slower right after 8 ms of low GPU
activity (the eager reference before it, or an idle GPU), and kforge's paired samples put it right after the
reference in half of them. The rows now tell the fix apart (`--settle-ms`): for each settle X (ms of
device-wide work right before a sample, targets/cuda.py; 0 is the loop before the fix)
- `kforge_one_set_settleX` (and `kforge_rotating_settleX` for 0 and the shipped value): `measure_pair`;
- `kb_after_reference_settleX`: KernelBench's loop with the eager reference run before every timed call and
  the settle in place of its flush;
and, as before, `kb_after_reference` / `kb_after_host_idle_8ms` (the slow state), the latter with the settle,
`kforge_vs_itself` (the compiled module on both sides) and `kforge_aa_reference` (A/A).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kforge_bot.evaluate.wire.timing import measure_pair  # noqa: E402
from kforge_bot.targets import make_target  # noqa: E402


def _problem(root: Path, spec: str):
    level, number = spec.split("/")
    path = sorted((root / "KernelBench" / f"level{level}").glob(f"{number}_*.py"))[0]
    module_spec = importlib.util.spec_from_file_location("kb_problem", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return path.stem, module


def _kb_loop(fn, sets, trials: int, clear, *, sync_after_clear: bool = False, prefill: int = 0,
             before=None) -> list[float]:
    """KernelBench's loop (L2 cleared, events around one call) cycling through `sets`, with one of kforge's
    steps added where asked; the first trial is not kept."""
    times = []
    for trial in range(trials + 1):
        inputs = sets[trial % len(sets)]
        if before is not None:
            before(*inputs)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        clear()
        if sync_after_clear:
            torch.cuda.synchronize()
        if prefill:
            torch.cuda._sleep(prefill)
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        if trial:
            times.append(start.elapsed_time(end))
    return times


def _kforge(reference, compiled, sets, budget: float) -> dict:
    target = make_target("cuda")
    result = measure_pair(target, lambda i: reference(*i), lambda i: compiled(*i), sets, timing_budget_s=budget,
                          target_precision=0.002, min_pairs=30, max_pairs=2000, confidence=0.95, warmup_ms=50,
                          after_baseline=lambda out, i: None, after_candidate=lambda out, i: None)
    return {"reference_ms": statistics.median(result.baseline_ms), "compiled_ms": statistics.median(result.candidate_ms),
            "pairs": len(result.baseline_ms), "mode": result.launch, "calls_per_sample": result.calls_per_sample}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--problem", default="1/40")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--budget", type=float, default=3.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--settle-ms", type=lambda text: [float(v) for v in text.split(",")], default=[0.0, 0.25, 1.0, 3.0],
                        help="kforge's device-wide settle before each sample, ms (0: the loop before 2026-12-02)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.kernelbench / "src"))
    # KernelBench's package imports LLM clients its timing does not use: the acceptance suite's stand-ins.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from kernelbench_acceptance import write_shims  # KernelBench imports LLM clients its timing does not use

    sys.path.insert(0, str(write_shims()))
    from kernelbench.timing import clear_l2_cache, time_execution_with_cuda_event

    name, problem = _problem(args.kernelbench, args.problem)
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).cuda().eval()
    compiled = torch.compile(model.forward)
    with torch.device("cuda"):
        sets = [[t.cuda() if isinstance(t, torch.Tensor) else t for t in problem.get_inputs()] for _ in range(3)]
    rows: dict[str, dict] = {}
    with torch.no_grad():
        compiled(*sets[0])  # compile outside every timed loop
        for label, fn in (("reference", model.forward), ("compiled", compiled)):
            times = time_execution_with_cuda_event(fn, sets[0], num_trials=args.trials, verbose=False)
            rows.setdefault("kb_one_set", {})[f"{label}_ms"] = statistics.median(times)
            times = _kb_loop(fn, sets, args.trials, lambda: clear_l2_cache("cuda"))
            rows.setdefault("kb_loop_rotating", {})[f"{label}_ms"] = statistics.median(times)
        # kforge's loop as it was (settle 0: flush, host wait, one-block spin) and as it is (device-wide work of
        # fixed length before every sample), then KernelBench's loop after the reference with each settle.
        from kforge_bot.targets import cuda as cuda_target

        target = make_target("cuda")
        default = cuda_target.SETTLE_MS
        clear = lambda: clear_l2_cache("cuda")  # noqa: E731
        try:
            for settle in args.settle_ms:
                cuda_target.SETTLE_MS = settle
                rows[f"kforge_one_set_settle{settle:g}"] = _kforge(model.forward, compiled, sets[:1], args.budget)
                if settle in (0.0, default):
                    rows[f"kforge_rotating_settle{settle:g}"] = _kforge(model.forward, compiled, sets, args.budget)
                rows[f"kb_after_reference_settle{settle:g}"] = {
                    f"{side}_ms": statistics.median(_kb_loop(fn, sets[:1], args.trials, lambda: target.settle(0.0),
                                                             before=model.forward))
                    for side, fn in (("reference", model.forward), ("compiled", compiled))}
            cuda_target.SETTLE_MS = default
            idle = lambda *i: (torch.cuda.synchronize(), time.sleep(0.008))  # noqa: E731
            for label, kwargs in (("kb_after_reference", {"before": model.forward}),
                                  ("kb_after_host_idle_8ms", {"before": idle})):
                rows[label] = {f"{side}_ms": statistics.median(_kb_loop(fn, sets[:1], args.trials, clear, **kwargs))
                               for side, fn in (("reference", model.forward), ("compiled", compiled))}
            rows[f"kb_after_host_idle_8ms_settle{default:g}"] = {
                f"{side}_ms": statistics.median(_kb_loop(fn, sets[:1], args.trials, lambda: target.settle(0.0),
                                                         before=idle))
                for side, fn in (("reference", model.forward), ("compiled", compiled))}
            rows["kforge_vs_itself"] = _kforge(compiled, compiled, sets[:1], args.budget)
            rows["kforge_aa_reference"] = _kforge(model.forward, model.forward, sets, args.budget)
        finally:
            cuda_target.SETTLE_MS = default
    for row in rows.values():
        row["speedup"] = row["reference_ms"] / row["compiled_ms"]
    data = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "problem": f"{args.problem} {name}", "rows": rows}
    for label, row in rows.items():
        print(f"{label:34s} reference {row['reference_ms']:.3f} ms  compiled {row['compiled_ms']:.3f} ms  "
              f"speedup {row['speedup']:.2f}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
