"""Why kforge-bot and KernelBench read different speedups for a compiled whole model (KernelBench level 3).

    python benchmarks/l3_agreement.py --kernelbench DIR --problems 3/28,3/4,3/9 [--json FILE]

The level-3 A/A sweep of 2026-12-04 read ViT's torch.compile candidate at 1.72x under kforge-bot and 1.38x under
KernelBench's harness, and LeNet5 at 1.10x (timed by graph replay) against 0.99x. Two differences between the
harnesses are candidates, and this script tells them apart, one process a problem, one compiled module per mode:
- the module's mode: kforge-bot builds a KernelBench `Model` and calls `.eval()` (inference); KernelBench's harness
  leaves it in training mode, where BatchNorm normalises by batch statistics (and updates its running ones),
  Dropout draws masks, and nn.TransformerEncoderLayer cannot take its fused inference path;
- what is timed: kforge-bot times the device's work (graph replays, or eager calls queued behind a device lead
  longer than their launches); KernelBench times one eager call between two events after a synchronize, so a
  model whose launches take longer than its kernels is timed at the host's pace.
Rows per mode (eval, train): `kb` (KernelBench's own `time_execution_with_cuda_event`, 100 trials, one input
set), `kforge` (`measure_pair`: device time, with the warm-up's eager figures beside it).
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
    module_spec = importlib.util.spec_from_file_location(f"kb_problem_{level}_{number}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return path.stem, module


def _rows(problem, mode: str, trials: int, budget: float, time_kb) -> dict:
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).cuda()
    model.train(mode == "train")
    compiled = torch.compile(model.forward)
    torch.manual_seed(1)
    sets = [[t.cuda() if isinstance(t, torch.Tensor) else t for t in problem.get_inputs()] for _ in range(3)]
    rows: dict[str, dict] = {}
    with torch.no_grad():
        started = time.monotonic()
        compiled(*sets[0])  # compiled outside every timed loop
        rows["compile_s"] = {"seconds": round(time.monotonic() - started, 1)}
        rows["kb"] = {f"{label}_ms": statistics.median(time_kb(fn, sets[0], num_trials=trials, verbose=False))
                      for label, fn in (("reference", model.forward), ("compiled", compiled))}
        result = measure_pair(make_target("cuda"), lambda i: model.forward(*i), lambda i: compiled(*i), sets,
                              timing_budget_s=budget, target_precision=0.002, min_pairs=30, max_pairs=2000,
                              confidence=0.95, warmup_ms=50, after_baseline=lambda out, i: None,
                              after_candidate=lambda out, i: None)
        per_call = result.per_call_ms
        rows["kforge"] = {"reference_ms": statistics.median(result.baseline_ms),
                          "compiled_ms": statistics.median(result.candidate_ms), "mode": result.launch,
                          "pairs": len(result.baseline_ms), "per_call_ms": per_call}
        rows["kforge_eager_warmup"] = {"reference_ms": per_call["baseline"]["eager"],
                                       "compiled_ms": per_call["candidate"]["eager"]}
    for row in rows.values():
        if "reference_ms" in row:
            row["speedup"] = row["reference_ms"] / row["compiled_ms"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--problems", default="3/28,3/4,3/9")
    parser.add_argument("--modes", default="eval,train")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(args.kernelbench / "src"))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from kernelbench_acceptance import write_shims  # KernelBench imports LLM clients its timing does not use

    sys.path.insert(0, str(write_shims()))
    from kernelbench.timing import time_execution_with_cuda_event

    data = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "problems": {}}
    for spec in args.problems.split(","):
        name, problem = _problem(args.kernelbench, spec)
        for mode in args.modes.split(","):
            rows = _rows(problem, mode, args.trials, args.budget, time_execution_with_cuda_event)
            data["problems"].setdefault(f"{spec} {name}", {})[mode] = rows
            for label, row in rows.items():
                if "speedup" in row:
                    print(f"{spec} {name} {mode:5s} {label:20s} reference {row['reference_ms']:.3f} ms  compiled "
                          f"{row['compiled_ms']:.3f} ms  speedup {row['speedup']:.3f}x"
                          + (f"  [{row['mode']}]" if "mode" in row else ""), flush=True)
            print(f"{spec} {name} {mode:5s} compile {rows['compile_s']['seconds']} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
