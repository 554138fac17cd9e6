"""The built-in tuner on the bundled Triton examples (issue 3's performance criteria).

For each example (softmax, RMSNorm, matmul + bias + ReLU in examples/kforge.yaml) it runs the same loop
`kforge-bot optimize` runs without an LLM endpoint, and records: the speedup of the best candidate over the
example as written (with its 95% interval), the achieved bandwidth (and FLOP/s for the matmul) of both,
as fractions of the measured ceilings, whether the memory-bound examples reach 80% of the measured DRAM
bandwidth, and the loop's own overhead per iteration (wall time minus evaluation time). Every figure comes
from `evaluate()`: child processes, correctness on every shape set, interleaved timing.

Bytes and FLOPs per call come from each example's workload (below), counting compulsory traffic: every
input read once and every output written once.

    python benchmarks/tuner_benchmark.py                       # cuda, the three Triton examples
    python benchmarks/tuner_benchmark.py --iterations 12 --time-budget 2
    python benchmarks/tuner_benchmark.py --target cpu --kernels matmul_bias_relu_cpu --iterations 2  # smoke test

Writes benchmarks/results/tuner_<target>.json and .md (or under --out). Defaults keep the whole run
within about six minutes on an H200: 330 s shared by the kernels (no candidate is started that would end
past a kernel's share), one correctness seed and two rotated input sets per candidate (an evaluation of
these shapes is mostly correctness on outputs of up to 512 MiB).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from kforge_bot.config.policy import Budgets  # noqa: E402
from kforge_bot.evaluate.wire.result import EvalSettings  # noqa: E402
from kforge_bot.hardware import Ceilings, ceilings_for, facts_for, load_ceilings  # noqa: E402
from kforge_bot.optimize.roofline import roofline_position  # noqa: E402
from kforge_bot.optimize.run import OptimizeRun, RunConfig, default_cpu_count  # noqa: E402
from kforge_bot.kernelspec import load_spec  # noqa: E402

MANIFEST = HERE.parent / "examples" / "kforge.yaml"
DEFAULT_KERNELS = ("softmax_triton", "rmsnorm_triton", "matmul_bias_relu_triton")
MEMORY_TARGET = 0.80  # the target for memory-bound examples: this fraction of measured DRAM bandwidth

# kernel -> shape set -> (bytes per call, FLOPs per call or None for a memory-bound kernel)
WORKLOADS: dict[str, Callable[[dict[str, Any]], tuple[float, float | None]]] = {
    # fp16 in, fp16 out
    "softmax_triton": lambda s: (2.0 * s["rows"] * s["cols"] * 2, None),
    # bf16 x and out, bf16 weight
    "rmsnorm_triton": lambda s: ((2.0 * s["rows"] * s["cols"] + s["cols"]) * 2, None),
    # fp16 a, b, bias in, fp16 c out; 2mnk FLOPs (the epilogue's m*n adds and max are not counted)
    "matmul_bias_relu_triton": lambda s: ((s["m"] * s["k"] + s["k"] * s["n"] + s["n"] + s["m"] * s["n"]) * 2.0,
                                          2.0 * s["m"] * s["n"] * s["k"]),
    # fp32 on the CPU (for a smoke test of this script)
    "matmul_bias_relu_cpu": lambda s: ((s["m"] * s["k"] + s["k"] * s["n"] + s["n"] + s["m"] * s["n"]) * 4.0,
                                       2.0 * s["m"] * s["n"] * s["k"]),
}


def measured_ceilings(target: str, device: str, override: str | None) -> tuple[Ceilings | None, str]:
    """This machine's doctor measurement, else the project's doctor run on this machine class
    (benchmarks/results/doctor_<runner>.json), else the runner's reference figures, else the datasheet."""
    if override:
        return load_ceilings(override), "--ceilings"
    found = ceilings_for(target, device)
    if found is not None and found.origin == "measured":
        return found, "doctor --save on this machine"
    runner = facts_for(target, device)
    if runner is not None:
        project = HERE / "results" / f"doctor_{runner.name}.json"
        if project.is_file():
            return load_ceilings(project), f"project doctor run ({project.relative_to(HERE.parent)})"
        reference = runner.reference_ceilings()
        if reference is not None:
            return reference, "runner reference figures"
    return found, "datasheet" if found is not None else "none"


def bench_kernel(name: str, args: argparse.Namespace, runs_dir: Path, time_limit: float) -> dict[str, Any]:
    spec = load_spec(MANIFEST, name)
    settings = EvalSettings(seeds=args.seeds, timing_budget_s=args.time_budget, timeout_s=300.0,
                            rotate_sets=args.rotate_sets)
    config = RunConfig(target=args.target, budgets=Budgets(iterations=args.iterations, time_limit_s=time_limit),
                       settings=settings, workload_model=WORKLOADS.get(name), cpu_count=default_cpu_count())
    started = time.monotonic()
    run = OptimizeRun.open(spec, config, runs_dir / name)
    outcome = run.run()
    run.finish()
    wall = time.monotonic() - started
    record = outcome.record
    baseline = record.baseline or {}
    device = str(baseline.get("device_name") or "")
    ceilings, origin = measured_ceilings(args.target, device, args.ceilings)
    ceil = ceilings.to_dict() if ceilings else None
    base_pos = roofline_position(record.paired_result(), "baseline", record.workload, ceil)
    best = record.best
    best_pos = roofline_position(best.result, "candidate", record.workload, ceil) if best else None
    done = record.completed
    evals = sum(it.eval_s for it in done)
    row: dict[str, Any] = {
        "kernel": name, "file": spec.kernel_file, "shapes": list(spec.shape_sets), "device": device,
        "iterations": len(done), "stop_reason": outcome.stop_reason, "tunables": record.tunables,
        # Both times from one interleaved measurement (the best's), else the first evaluation's.
        "baseline_ms": record.times_ms()[0], "best_ms": record.times_ms()[1],
        "speedup": best.speedup if best else None, "speedup_ci": list(best.speedup_ci) if best and best.speedup_ci else None,
        "best_change": best.change if best else None, "best_iteration": best.iteration if best else None,
        "verdicts": [it.verdict for it in done],
        "candidates": [{"iteration": it.iteration, "change": it.change, "verdict": it.verdict, "speedup": it.speedup,
                        "speedup_ci": list(it.speedup_ci) if it.speedup_ci else None, "accepted": it.accepted,
                        "eval_s": it.eval_s, "iteration_s": it.iteration_s} for it in done],
        "position_baseline": _position(base_pos), "position_best": _position(best_pos),
        "ceilings": ceil, "ceilings_origin": origin,
        "loop_overhead_s_per_iteration": (sum(it.overhead_s for it in done) / len(done)) if done else None,
        "evaluate_s_per_iteration": evals / len(done) if done else None,
        "baseline_eval_s": record.baseline_eval_s,
        # The rest of the kernel's wall time: process start-up of the run's parts, hardware facts, the report.
        "session_overhead_s": max(0.0, wall - evals - record.baseline_eval_s),
        "wall_s": wall, "time_limit_s": time_limit, "report": str(runs_dir / name / "report.md"),
    }
    memory_bound = WORKLOADS.get(name, lambda s: (0.0, None))(dict(spec.shape_sets[0]))[1] is None
    final = best_pos or base_pos
    if memory_bound and final and final.get("bandwidth_fraction") is not None:
        row["memory_target_met"] = final["bandwidth_fraction"] >= MEMORY_TARGET
    return row


def _position(pos: dict[str, Any] | None) -> dict[str, Any] | None:
    if not pos:
        return None
    keys = ("achieved_gbs", "achieved_tflops", "bandwidth_fraction", "compute_fraction", "roofline_fraction",
            "bound", "precision", "flops_known")
    return {k: pos.get(k) for k in keys}


def _pct(value: Any) -> str:
    return f"{100 * value:.0f}%" if isinstance(value, (int, float)) else "n/a"


def _fig(pos: dict[str, Any] | None) -> str:
    if not pos:
        return "n/a"
    if pos.get("flops_known") and pos.get("achieved_tflops") is not None:
        return f"{pos['achieved_tflops']:.3g} TFLOP/s ({_pct(pos.get('roofline_fraction'))})"
    return f"{pos['achieved_gbs']:.4g} GB/s ({_pct(pos.get('bandwidth_fraction'))})"


def markdown(data: dict[str, Any]) -> str:
    lines = [f"# Tuner benchmark: {data['target']} ({data['device']})", "",
             f"{data['date']}, host {data['host']}, torch {data['torch']}, triton {data['triton']}. "
             f"Up to {data['iterations']} candidates per kernel, {data['timing_budget_s']} s of interleaved timing per "
             f"candidate, {data['seeds']} seed(s) per shape set, {data.get('rotate_sets')} rotated input sets; the "
             f"built-in tuner (no LLM), {data.get('total_time_limit_s')} s shared by the kernels. Ceilings: "
             f"{data['ceilings_origin']}.", "",
             "| kernel | speedup over the example (95% CI) | best change | time before -> after | achieved before -> "
             "after (fraction of measured ceiling) | >= 80% of DRAM bw | iterations | loop overhead / iteration | "
             "stopped because |", "|---|---|---|---|---|---|---|---|---|"]
    for r in data["kernels"]:
        if r.get("error"):
            lines.append(f"| {r['kernel']} | error: {r['error']} | | | | | | | |")
            continue
        speed = f"{r['speedup']:.2f}x ({r['speedup_ci'][0]:.2f}-{r['speedup_ci'][1]:.2f})" if r["speedup"] else \
            "none found (as written is best)"
        times = f"{r['baseline_ms']:.4g} ms -> {r['best_ms']:.4g} ms" if r["best_ms"] else f"{r['baseline_ms']:.4g} ms"
        target = {True: "yes", False: "no"}.get(r.get("memory_target_met"), "-")
        overhead = r["loop_overhead_s_per_iteration"]
        per_step = f"{overhead * 1000:.0f} ms" if overhead is not None else "n/a"
        lines.append(f"| {r['kernel']} | {speed} | {r['best_change'] or '-'} | {times} | "
                     f"{_fig(r['position_baseline'])} -> {_fig(r['position_best'])} | {target} | {r['iterations']} | "
                     f"{per_step} | {r['stop_reason']} |")
    lines += ["", "Time = median per call summed over the kernel's shape sets. Achieved bandwidth counts compulsory "
              "traffic (inputs read once, outputs written once); the matmul's figure is FLOP/s against the "
              "measured fp16 matmul ceiling. Loop overhead = an iteration's wall time minus the time inside "
              "`evaluate()` (proposing, rewriting, recording). Per-kernel reports: see `report` in the JSON.", ""]
    for r in data["kernels"]:
        if r.get("candidates"):
            lines.append(f"- {r['kernel']}: " + "; ".join(
                f"{c['change']}: {c['verdict']}" + (f" {c['speedup']:.3f}x" if c['speedup'] else "")
                + (" (accepted)" if c["accepted"] else "") for c in r["candidates"]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--kernels", nargs="+", default=list(DEFAULT_KERNELS))
    parser.add_argument("--iterations", type=int, default=6, help="candidates per kernel, at most (default 6)")
    parser.add_argument("--time-budget", type=float, default=1.0, help="seconds of timing per candidate (default 1)")
    # An evaluation's time on these shapes is mostly correctness on outputs of up to 512 MiB (each case's output
    # is written, read back and compared): fewer seeds and input rotations keep a kernel within its limit.
    parser.add_argument("--seeds", type=int, default=1, help="correctness seeds per shape set (default 1)")
    parser.add_argument("--rotate-sets", type=int, default=2, help="input sets rotated while timing (default 2)")
    parser.add_argument("--total-time-limit", type=float, default=330.0,
                        help="seconds for all kernels, shared out as they run (a kernel that stops early leaves its "
                             "time to the next); no candidate is started that would end past its share (default 330)")
    parser.add_argument("--ceilings", default=None, help="a doctor --save / --json file to measure fractions against")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--runs-dir", type=Path, default=None, help="keep each kernel's report folder here")
    args = parser.parse_args(argv)

    import torch

    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="kforge-tuner-bench-"))
    rows = []
    started = time.monotonic()
    for index, name in enumerate(args.kernels):
        share = max(1.0, (args.total_time_limit - (time.monotonic() - started)) / (len(args.kernels) - index))
        print(f"== {name} (up to {share:.0f} s)", flush=True)
        try:
            row = bench_kernel(name, args, runs_dir, share)
        except Exception as exc:  # noqa: BLE001 - one broken example must not hide the others' results
            row = {"kernel": name, "error": f"{type(exc).__name__}: {exc}"[:500]}
        print(json.dumps({k: v for k, v in row.items() if k != "candidates"}, default=str), flush=True)
        rows.append(row)
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    device = next((r["device"] for r in rows if r.get("device")), "unknown")
    data = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "target": args.target,
        "device": device, "host": platform.node(), "torch": torch.__version__, "triton": triton_version,
        "iterations": args.iterations, "timing_budget_s": args.time_budget, "seeds": args.seeds,
        "rotate_sets": args.rotate_sets,
        "total_time_limit_s": args.total_time_limit,
        "ceilings_origin": next((r["ceilings_origin"] for r in rows if r.get("ceilings_origin")), "none"),
        "wall_s": time.monotonic() - started, "runs_dir": str(runs_dir), "kernels": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"tuner_{args.target}.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    (args.out / f"tuner_{args.target}.md").write_text(markdown(data))
    print(markdown(data))
    print(f"wrote {args.out / f'tuner_{args.target}.json'} and .md in {data['wall_s']:.0f} s; reports in {runs_dir}")
    return 0 if all(not r.get("error") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
