"""End-to-end workloads on a GPU (issue 44): tinylm (examples/tinylm, about 375M parameters in bfloat16) through
kforge_bot.workloads.measure: each side in its own fresh sandboxed process, both warmed up, then samples of many calls
(--sample-s each) alternating in pairs until the interval is --precision wide, --max-pairs, or --budget-s.

Phases (--phases, comma-separated):
- `triton`: each workload of examples/kforge.yaml with the eager PyTorch kernels (base) against the bundled Triton
  kernels (head): change, interval, pairs, seconds (the outputs are compared and the difference noted, not judged:
  the two round differently);
- `aa`: --runs A/A measurements of one workload (Triton on both sides): each interval should contain 1.0 with a
  half-width of at most --precision;
- `slowdown`: --runs measurements (alternating with the A/A runs) of a head whose RMSNorm does a redundant pass
  over part of its rows (and whole extra passes where that is not enough), calibrated in this process to slow the
  whole workload by --slowdown (no sleeps), judged at --threshold by the gate's rule
  (kforge_bot.gate.decision.timing_decision): caught when `regression`.

Prints a table and writes --out/workloads_h200.json. No measurement starts after --max-seconds. Each measurement
runs three rounds, each on a fresh pair of processes (about 5 s to start on an H100), 48-51 s each on the larger
prefill below; the A/A and the slowdown runs in calls of their own, on a prefill large enough to keep the GPU busy
(at batch 4 and prompt 512 the H100 waited on the host's launches, benchmarks/results/workloads_h100.md), each about
9 minutes:
  PYTHONPATH=$PWD bash -c '. benchmarks/device_sandbox.sh; timeout 560 python3 benchmarks/workloads_h200.py \
      --phases aa --runs 10 --workload-args "{\"batch\": 16, \"prompt\": 2048}" --max-seconds 480 --out $OUT'
  (the same with --phases slowdown, and --phases triton for eager against Triton)
On this CPU (a smoke of the script and the CPU's own figures: tinylm_decode_cpu, eager kernels):
  python benchmarks/workloads_h200.py --device cpu --workload tinylm_decode_cpu --phases aa,slowdown --out /tmp/w
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile
import time
import types
from dataclasses import replace
from pathlib import Path

import torch

from kforge_bot.config.policy import Policy
from kforge_bot.gate.decision import fmt_change, timing_decision
from kforge_bot.kernelspec import read_manifest
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


# The module whose RMSNorm the slower variant replaces, per device: the bundled Triton kernel on a GPU, the eager
# ops on the CPU (a smoke run of this script where Triton does not run).
RMSNORM_MODULE = {"cuda": ("rmsnorm", EXAMPLES / "triton" / "rmsnorm.py"),
                  "cpu": ("tinylm.ops_eager", EXAMPLES / "tinylm" / "ops_eager.py")}


CALIBRATION_SAMPLE_S = 0.08  # seconds of calls in each of the calibration's samples


def slow_source(device: str, extra: int, fraction: float) -> str:
    return RMSNORM_MODULE[device][1].read_text() + SLOW_TAIL.format(extra=extra, fraction=fraction)


def slow_overlay(device: str, extra: int, fraction: float, folder: Path) -> dict[str, str]:
    path = folder / RMSNORM_MODULE[device][1].name
    path.write_text(slow_source(device, extra, fraction))
    return {RMSNORM_MODULE[device][0]: str(path)}


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def load_variant(device: str, extra: int, fraction: float, folder: Path) -> types.ModuleType:
    """The slower RMSNorm module, loaded in this process from its file (Triton reads a kernel's source from it)."""
    path = folder / f"rmsnorm_variant_{extra}_{int(fraction * 1e6)}.py"
    path.write_text(slow_source(device, extra, fraction))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def paired_slowdown(entry, inputs: tuple, fast: object, slow: object, device: str, pairs: int = 15,
                    calls: int = 5) -> float:
    """How much slower the workload runs with the `slow` ops than with the `fast` ones, in this process (the
    calibration only: the measurements are the sandboxed pairs): the model's ops swapped in alternating pairs of
    `calls` calls, the median of the pairs' ratios, minus 1."""
    model = inputs[0]
    ratios = []
    for i in range(pairs):
        order = [("fast", fast), ("slow", slow)] if i % 2 == 0 else [("slow", slow), ("fast", fast)]
        took = {}
        for name, ops in order:
            model.ops = ops
            sync(device)
            start = time.perf_counter()
            for _ in range(calls):
                entry(*inputs)
            sync(device)
            took[name] = time.perf_counter() - start
        ratios.append(took["slow"] / took["fast"])
    model.ops = fast
    return statistics.median(ratios) - 1.0


def calibrate(spec: WorkloadSpec, device: str, slowdown: float) -> tuple[int, float, float]:
    """(EXTRA, FRACTION, the in-process slowdown they gave) for a head `slowdown` slower end to end: one whole extra
    RMSNorm pass measured against none, then the passes that make `slowdown`, checked."""
    sys.path[:0] = [p for p in spec.sys_paths if p not in sys.path]
    program = importlib.import_module(spec.module)
    inputs = program.make_inputs(seed=spec.seed, device=device, **spec.args)
    entry = getattr(program, spec.entry)
    fast = inputs[0].ops
    folder = Path(tempfile.mkdtemp(prefix="kforge-calibrate-"))

    def ops_with(extra: int, fraction: float) -> types.SimpleNamespace:
        variant = load_variant(device, extra, fraction, folder)
        return types.SimpleNamespace(rmsnorm=variant.rmsnorm, swiglu=fast.swiglu, softmax=fast.softmax)

    one = ops_with(1, 0.0)
    for ops in (fast, one):  # compilation and caches, untimed
        inputs[0].ops = ops
        for _ in range(3):
            entry(*inputs)
    # Samples of about CALIBRATION_SAMPLE_S however long a call takes: at a fixed 5 calls a sample, a large prefill's
    # calibration would take more than a minute of a device call's ten.
    sync(device)
    start = time.perf_counter()
    entry(*inputs)
    sync(device)
    calls = max(1, math.ceil(CALIBRATION_SAMPLE_S / max(time.perf_counter() - start, 1e-6)))
    per_pass = max(paired_slowdown(entry, inputs, fast, one, device, calls=calls), 0.002)
    passes = min(slowdown / per_pass, 20.0)
    extra, fraction = int(passes), passes - int(passes)
    chosen = ops_with(extra, fraction)
    inputs[0].ops = chosen
    for _ in range(3):
        entry(*inputs)
    got = paired_slowdown(entry, inputs, fast, chosen, device, calls=calls)
    del inputs
    if device == "cuda":
        torch.cuda.empty_cache()
    return extra, fraction, got


def row(label: str, m: WorkloadMeasurement, threshold: float | None = None) -> dict:
    decision = timing_decision(m.speedup_ci, threshold) if threshold is not None else ""
    ci = m.speedup_ci
    return {"run": label, "status": m.status, "change": fmt_change(m.speedup, ci), "speedup": m.speedup,
            "speedup_ci": list(ci) if ci else None, "half_width": m.half_width, "pairs": m.pairs,
            "seconds": round(m.wall_s, 1), "boot_s": round(m.boot_s, 1), "calls_per_sample": m.calls_per_sample,
            "contains_1": bool(ci and ci[0] <= 1.0 <= ci[1]),
            "decision": decision, "noise_floor": m.noise_floor, "stop": m.stop, "note": m.reason,
            "warmup_ms": m.warmup_ms, "process_ratios": m.process_ratios,
            # the pairs themselves: which pair of processes, base's and head's ms a call (the H100's first run of
            # this design kept none, and its A/A could not be taken apart)
            "pairs_ms": [[k, round(b, 4), round(h, 4)] for k, b, h in zip(m.pair_process, m.base_ms, m.head_ms)]}


def show(r: dict) -> None:
    hw = f"{r['half_width']:.3%}" if r["half_width"] is not None else "n/a"
    nf = f"{r['noise_floor']:.3%}" if r["noise_floor"] is not None else "n/a"
    print(f"{r['run']:<34} {r['status']:<9} {r['change']:<30} hw {hw:<8} pairs {r['pairs']:<3} {r['seconds']:>6} s "
          f"(boot {r['boot_s']} s, {r['calls_per_sample']} calls a sample) noise {nf:<8} {r['decision']} "
          f"{r['note'][:80]}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", default="triton,aa,slowdown")
    ap.add_argument("--workload", default="tinylm_prefill", help="the A/A and slowdown runs' workload")
    ap.add_argument("--workload-args", type=json.loads, default={},
                    help='JSON over that workload\'s args, e.g. \'{"batch": 16, "prompt": 2048}\': a prefill that keeps '
                         "the GPU busy rather than waiting on the host's launches")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--precision", type=float, default=0.005)
    ap.add_argument("--min-pairs", type=int, default=8)
    ap.add_argument("--max-pairs", type=int, default=40)
    ap.add_argument("--budget-s", type=float, default=45.0,
                    help="seconds per measurement, its processes' start included")
    ap.add_argument("--sample-s", type=float, default=0.25, help="seconds of calls a sample runs at least")
    ap.add_argument("--processes", type=int, default=3, help="rounds, each on a fresh pair of processes")
    ap.add_argument("--slowdown", type=float, default=0.02)
    ap.add_argument("--threshold", type=float, default=0.01, help="the slowdown runs' gate.workloads threshold")
    ap.add_argument("--device", default="cuda", choices=sorted(RMSNORM_MODULE),
                    help="cpu: a smoke run of the script (tinylm_decode_cpu, eager kernels)")
    ap.add_argument("--max-seconds", type=float, default=420.0,
                    help="no new measurement starts after this many seconds (the JSON says what ran)")
    ap.add_argument("--out", default="gpu-out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = Policy().eval_settings("gate")
    budget = Budget(precision=args.precision, min_pairs=args.min_pairs, max_pairs=args.max_pairs,
                    budget_s=args.budget_s, sample_s=args.sample_s, processes=args.processes)
    all_specs = specs()
    spec = all_specs[args.workload]
    spec = replace(spec, args={**spec.args, **args.workload_args})
    device = args.device
    if device == "cpu":
        torch.set_num_threads(1)  # as the workloads' processes do (a busy machine's threads wait on each other)
    results: dict = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                     "torch": torch.__version__, "args": vars(args), "isolation": settings.isolation,
                     "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
                     "load_at_start": os.getloadavg()}
    phases = args.phases.split(",")
    started = time.monotonic()

    def time_left() -> bool:
        if time.monotonic() - started < args.max_seconds:
            return True
        results["cut_short"] = f"stopped at --max-seconds {args.max_seconds:g}"
        return False

    print(f"{results['device']}, torch {torch.__version__}; workload {spec.name} ({spec.args})", flush=True)
    if "triton" in phases:
        results["eager_vs_triton"] = []
        for name, w in all_specs.items():
            if not time_left():
                break
            if device not in w.targets or w.module == "tinylm.workload_eager":
                continue
            m = measure(Side("eager", eager(w)), Side("triton", w), device, settings, budget, judge_outputs=False)
            r = row(f"{name}: eager -> triton", m)
            show(r)
            results["eager_vs_triton"].append(r)
    # A/A and slowdown runs alternate, so a run cut short by --max-seconds leaves as many of each.
    overlay: dict[str, str] = {}
    folder = Path(tempfile.mkdtemp(prefix="kforge-slow-"))
    if "slowdown" in phases and time_left():
        extra, fraction, got = calibrate(spec, device, args.slowdown)
        print(f"slower variant: {extra} extra RMSNorm pass(es) + {fraction:.3f} of the rows once more: "
              f"{got:+.2%} end to end in this process (alternating pairs)", flush=True)
        results["slowdown"] = {"extra": extra, "fraction": fraction, "in_process": got, "runs": []}
        overlay = slow_overlay(device, extra, fraction, folder)
    if "aa" in phases:
        results["aa"] = []
    for i in range(args.runs):
        if "aa" in phases and time_left():
            r = row(f"A/A {i + 1}", measure(Side("base", spec), Side("head", spec), device, settings, budget))
            show(r)
            results["aa"].append(r)
        if overlay and time_left():
            m = measure(Side("base", spec), Side("slow", spec, overlay, readable=(str(folder),)), device, settings,
                        budget)
            r = row(f"slowdown {i + 1}", m, args.threshold)
            show(r)
            results["slowdown"]["runs"].append(r)
    if "aa" in phases:
        aa = results["aa"]
        widths = [r["half_width"] for r in aa if r["half_width"] is not None]
        print(f"A/A: {sum(r['contains_1'] for r in aa)}/{len(aa)} intervals contain 1.0; half-width <= "
              f"{args.precision:.2%} in {sum((r['half_width'] or math.inf) <= args.precision for r in aa)}/{len(aa)}"
              + (f"; half-widths {min(widths):.3%} to {max(widths):.3%}" if widths else ""), flush=True)
    if "slowdown" in results:
        runs = results["slowdown"]["runs"]
        print(f"slowdown of {results['slowdown']['in_process']:+.2%} (in process): caught "
              f"{sum(r['decision'] == 'regression' for r in runs)}/{len(runs)} at the {args.threshold:.1%} threshold; "
              f"measured " + ", ".join(r["change"].split(" ")[0] for r in runs), flush=True)
    results["seconds"] = round(time.monotonic() - started, 1)
    results["load_at_end"] = os.getloadavg()
    if results.get("cut_short"):
        print(results["cut_short"])
    (out / "workloads_h200.json").write_text(json.dumps(results, indent=1))
    print(f"total {results['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
