"""End-to-end workloads on a GPU (issue 44): tinylm (examples/tinylm, about 375M parameters in bfloat16) through
kforge_bot.workloads.measure, each side in its own fresh sandboxed process, pairs alternating who goes first.

Phases (--phases, comma-separated):
- `triton`: each workload of examples/kforge.yaml with the eager PyTorch kernels (base) against the bundled Triton
  kernels (head): change, interval, pairs, seconds (the outputs are compared and the difference noted, not judged:
  the two round differently);
- `aa`: --runs A/A measurements of one workload (Triton on both sides): each interval should contain 1.0 with a
  half-width of at most --precision;
- `slowdown`: --runs measurements of a head whose RMSNorm does a redundant extra pass over part of its rows,
  calibrated in this process to slow the whole workload by --slowdown (no sleeps), judged at --threshold by the
  gate's rule (kforge_bot.gate.decision.timing_decision): caught when `regression`.

Prints a table and writes --out/workloads_h200.json. On the device: PYTHONPATH=$PWD bash -c '. benchmarks/
device_sandbox.sh; timeout 530 python3 benchmarks/workloads_h200.py --out $OUT'.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from kforge_bot.config.policy import Policy
from kforge_bot.gate.decision import fmt_change, timing_decision
from kforge_bot.spec import read_manifest
from kforge_bot.workloads.measure import Budget, Side, WorkloadMeasurement, measure
from kforge_bot.workloads.spec import WorkloadSpec, load_workloads

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# The slower variant: the bundled RMSNorm, then the same kernel once more over the first FRACTION of the rows
# (a redundant pass, real work on the device) and EXTRA whole passes.
SLOW_TAIL = '''

_FAST = rmsnorm
EXTRA = {extra}
FRACTION = {fraction}


def rmsnorm(x, weight):
    out = _FAST(x, weight)
    for _ in range(EXTRA):
        out = _FAST(x, weight)
    rows = int(x.shape[0] * FRACTION)
    if rows:
        _FAST(x[:rows], weight)
    return out
'''


def specs() -> dict[str, WorkloadSpec]:
    path = EXAMPLES / "kforge.yaml"
    return load_workloads(path, read_manifest(path)["workloads"])


def eager(spec: WorkloadSpec) -> WorkloadSpec:
    return replace(spec, file="tinylm/workload_eager.py", module="tinylm.workload_eager",
                   inputs_file="tinylm/workload_eager.py", inputs_module="tinylm.workload_eager")


def slow_overlay(extra: int, fraction: float, folder: Path) -> dict[str, str]:
    source = (EXAMPLES / "triton" / "rmsnorm.py").read_text() + SLOW_TAIL.format(extra=extra, fraction=fraction)
    path = folder / "rmsnorm.py"
    path.write_text(source)
    return {"rmsnorm": str(path)}


def in_process_ms(spec: WorkloadSpec, rmsnorm_source: str | None, calls: int = 20) -> float:
    """The workload's median call time in this process (calibration only: the measurements are the sandboxed
    pairs), with the module `rmsnorm` replaced by `rmsnorm_source` where given."""
    sys.path[:0] = [p for p in spec.sys_paths if p not in sys.path]
    import importlib

    for name in [n for n in sys.modules if n == "rmsnorm" or n.startswith("tinylm")]:
        del sys.modules[name]
    if rmsnorm_source is not None:
        module = type(sys)("rmsnorm")
        folder = Path(tempfile.mkdtemp())
        (folder / "rmsnorm.py").write_text(rmsnorm_source)
        module.__file__ = str(folder / "rmsnorm.py")
        exec(compile(rmsnorm_source, module.__file__, "exec"), module.__dict__)
        sys.modules["rmsnorm"] = module
    program = importlib.import_module(spec.module)
    inputs = program.make_inputs(seed=spec.seed, device="cuda", **spec.args)
    entry = getattr(program, spec.entry)
    for _ in range(3):
        entry(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        entry(*inputs)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    del inputs
    torch.cuda.empty_cache()
    return sorted(times)[len(times) // 2]


def calibrate(spec: WorkloadSpec, slowdown: float) -> tuple[int, float, float]:
    """(EXTRA, FRACTION, the in-process slowdown they gave) for a head `slowdown` slower end to end."""
    base_src = (EXAMPLES / "triton" / "rmsnorm.py").read_text()
    t0 = in_process_ms(spec, None)
    t1 = in_process_ms(spec, base_src + SLOW_TAIL.format(extra=1, fraction=0.0))
    per_pass = max(t1 - t0, 1e-6) / t0  # one whole extra pass, relative to the workload
    passes = slowdown / per_pass
    extra, fraction = int(passes), min(1.0, passes - int(passes))
    got = in_process_ms(spec, base_src + SLOW_TAIL.format(extra=extra, fraction=fraction)) / t0 - 1.0
    return extra, fraction, got


def row(label: str, m: WorkloadMeasurement, threshold: float | None = None) -> dict:
    decision = timing_decision(m.speedup_ci, threshold) if threshold is not None else ""
    ci = m.speedup_ci
    return {"run": label, "status": m.status, "change": fmt_change(m.speedup, ci), "speedup": m.speedup,
            "speedup_ci": list(ci) if ci else None, "half_width": m.half_width, "pairs": m.pairs,
            "seconds": round(m.wall_s, 1), "contains_1": bool(ci and ci[0] <= 1.0 <= ci[1]),
            "decision": decision, "noise_floor": m.noise_floor, "stop": m.stop, "note": m.reason,
            "warmup_ms": m.warmup_ms}


def show(r: dict) -> None:
    hw = f"{r['half_width']:.3%}" if r["half_width"] is not None else "n/a"
    nf = f"{r['noise_floor']:.3%}" if r["noise_floor"] is not None else "n/a"
    print(f"{r['run']:<34} {r['status']:<9} {r['change']:<30} hw {hw:<8} pairs {r['pairs']:<3} {r['seconds']:>6} s "
          f"noise {nf:<8} {r['decision']} {r['note'][:80]}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", default="triton,aa,slowdown")
    ap.add_argument("--workload", default="tinylm_prefill", help="the A/A and slowdown runs' workload")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--precision", type=float, default=0.005)
    ap.add_argument("--min-pairs", type=int, default=6)
    ap.add_argument("--max-pairs", type=int, default=12)
    ap.add_argument("--budget-s", type=float, default=60.0, help="seconds per measurement")
    ap.add_argument("--slowdown", type=float, default=0.02)
    ap.add_argument("--threshold", type=float, default=0.01, help="the slowdown runs' gate.workloads threshold")
    ap.add_argument("--out", default="gpu-out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = Policy().eval_settings("gate")
    budget = Budget(precision=args.precision, min_pairs=args.min_pairs, max_pairs=args.max_pairs,
                    budget_s=args.budget_s)
    all_specs = specs()
    spec = all_specs[args.workload]
    results: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "args": vars(args),
                     "isolation": settings.isolation, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    phases = args.phases.split(",")
    started = time.monotonic()
    print(f"{results['device']}, torch {torch.__version__}; workload {spec.name} ({spec.args})", flush=True)
    if "triton" in phases:
        results["eager_vs_triton"] = []
        for name, w in all_specs.items():
            if "cuda" not in w.targets:
                continue
            m = measure(Side("eager", eager(w)), Side("triton", w), "cuda", settings, budget, judge_outputs=False)
            r = row(f"{name}: eager -> triton", m)
            show(r)
            results["eager_vs_triton"].append(r)
    if "aa" in phases:
        results["aa"] = []
        for i in range(args.runs):
            r = row(f"A/A {i + 1}", measure(Side("base", spec), Side("head", spec), "cuda", settings, budget))
            show(r)
            results["aa"].append(r)
        aa = results["aa"]
        print(f"A/A: {sum(r['contains_1'] for r in aa)}/{len(aa)} intervals contain 1.0; half-width <= "
              f"{args.precision:.2%} in {sum((r['half_width'] or math.inf) <= args.precision for r in aa)}/{len(aa)}")
    if "slowdown" in phases:
        extra, fraction, got = calibrate(spec, args.slowdown)
        print(f"slower variant: {extra} extra RMSNorm pass(es) + {fraction:.3f} of the rows once more: "
              f"{got:+.2%} end to end in process", flush=True)
        results["slowdown"] = {"extra": extra, "fraction": fraction, "in_process": got, "runs": []}
        folder = Path(tempfile.mkdtemp(prefix="kforge-slow-"))
        overlay = slow_overlay(extra, fraction, folder)
        for i in range(args.runs):
            m = measure(Side("base", spec), Side("slow", spec, overlay, readable=(str(folder),)), "cuda", settings,
                        budget)
            r = row(f"slowdown {i + 1}", m, args.threshold)
            show(r)
            results["slowdown"]["runs"].append(r)
        runs = results["slowdown"]["runs"]
        print(f"slowdown of {got:+.2%}: caught {sum(r['decision'] == 'regression' for r in runs)}/{len(runs)} at the "
              f"{args.threshold:.1%} threshold")
    results["seconds"] = round(time.monotonic() - started, 1)
    (out / "workloads_h200.json").write_text(json.dumps(results, indent=1))
    print(f"total {results['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
