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
Run 1 (2026-12-02) found the loop itself: one set, same process, 0.383 ms against 0.529 ms. The variants tell
kforge's steps apart, each added to KernelBench's loop on one set:
- `kb_sync_after_flush`: the device synchronized between the cache flush and the start event (kforge does);
- `kb_prefill`: that, plus kforge's pre-start spin (`torch.cuda._sleep`) before the start event;
- `kb_after_reference`: the eager reference run (untimed) before every timed call, as paired sampling does;
- `kforge_vs_itself`: `measure_pair` with the compiled module on both sides (no reference in the loop).
Run 2 put the gap on the reference run before the call (0.521 ms after it, 0.320 ms paired with itself). What
of the reference's run lasts through a cache flush and a synchronize is told apart by what runs before the
timed call instead:
- `kb_after_reference_then_self`: the reference, then one untimed compiled call;
- `kb_after_one_sm_8ms`: 8 ms of a one-block spin (most SMs idle, as during the reference's 16-block kernel);
- `kb_after_host_idle_8ms`: 8 ms with the GPU idle (the host sleeps).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kforge_bot.evaluate.timing import measure_pair  # noqa: E402
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
    result = measure_pair(target, lambda i: reference(*i), lambda i: compiled(*i), sets, time_budget_s=budget,
                          target_precision=0.002, min_pairs=30, max_pairs=2000, confidence=0.95, warmup_ms=50,
                          after_baseline=lambda out, i: None, after_candidate=lambda out, i: None)
    return {"reference_ms": statistics.median(result.baseline_ms), "compiled_ms": statistics.median(result.candidate_ms),
            "pairs": len(result.baseline_ms), "mode": result.mode, "calls_per_sample": result.calls_per_sample}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--problem", default="1/40")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--budget", type=float, default=3.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(args.kernelbench / "src"))
    # KernelBench's package imports LLM clients its timing does not use: the acceptance suite's stand-ins.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from kernelbench_acceptance import SHIMS

    shims = Path(tempfile.mkdtemp(prefix="kb-shims-"))
    for file_name, text in SHIMS.items():
        (shims / file_name).write_text(text)
    sys.path.insert(0, str(shims))
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
        rows["kforge_one_set"] = _kforge(model.forward, compiled, sets[:1], args.budget)
        rows["kforge_rotating"] = _kforge(model.forward, compiled, sets, args.budget)
        from kforge_bot.targets.cuda import PREFILL_CYCLES

        clear = lambda: clear_l2_cache("cuda")  # noqa: E731
        spin_8ms = int(8e-3 * torch.cuda.clock_rate(0) * 1e6) if hasattr(torch.cuda, "clock_rate") else 16_000_000
        for label, kwargs in (("kb_sync_after_flush", {"sync_after_clear": True}),
                              ("kb_prefill", {"sync_after_clear": True, "prefill": PREFILL_CYCLES}),
                              ("kb_after_reference", {"before": model.forward}),
                              ("kb_after_reference_then_self", {"before": lambda *i: (model.forward(*i), compiled(*i))}),
                              ("kb_after_one_sm_8ms", {"before": lambda *i: torch.cuda._sleep(spin_8ms)}),
                              ("kb_after_host_idle_8ms", {"before": lambda *i: (torch.cuda.synchronize(), time.sleep(0.008))})):
            rows[label] = {f"{side}_ms": statistics.median(_kb_loop(fn, sets[:1], args.trials, clear, **kwargs))
                           for side, fn in (("reference", model.forward), ("compiled", compiled))}
        rows["kforge_vs_itself"] = _kforge(compiled, compiled, sets[:1], args.budget)
    for row in rows.values():
        row["speedup"] = row["reference_ms"] / row["compiled_ms"]
    data = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "problem": f"{args.problem} {name}", "rows": rows}
    for label, row in rows.items():
        print(f"{label:18s} reference {row['reference_ms']:.3f} ms  compiled {row['compiled_ms']:.3f} ms  "
              f"speedup {row['speedup']:.2f}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
