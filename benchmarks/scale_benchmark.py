"""Scale-out benchmark: candidate throughput of the evaluation pool with 1 and 2 devices, compile hidden by
compile-ahead, and the optimize loop's own overhead per candidate.

    PYTHONPATH=$PWD python3 benchmarks/scale_benchmark.py --out DIR            # a 2-GPU host (~6 min)
    PYTHONPATH=$PWD python3 benchmarks/scale_benchmark.py --target cpu --smoke --out DIR   # proves the path

Sections (each capped by candidate count and by time):
- triton: distinct variants of examples/triton/softmax.py (the tuner's one-parameter moves), evaluated on
  a pool of 1 and of 2 GPUs: candidates per minute.
- cuda: distinct variants of examples/cuda/rmsnorm_cuda.py (a #define added to the CUDA source, so each needs
  its own load_inline build), 1 and 2 GPUs, with compile-ahead on the CPU: wall time against the sum of
  compile (prepare) and evaluation times; "hidden" = 1 - wall / (compile + evaluate summed).
- loop: `optimize`'s loop with the built-in tuner, --parallel = devices, a few candidates: the loop's own
  time per candidate (loop_s) as a fraction of evaluation time.
Needs torch (and triton on GPUs); not openai, gitpython, pygithub or ray.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import socket
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kforge_bot.agents.tunables import apply, current_assignment, find_tunables  # noqa: E402
from kforge_bot.evaluate.result import EvalSettings  # noqa: E402
from kforge_bot.scale.devices import discover_devices  # noqa: E402
from kforge_bot.scale.pool import EvalPool  # noqa: E402
from kforge_bot.spec import load_spec  # noqa: E402

MANIFEST = REPO / "examples" / "kforge.yaml"


def tuner_variants(spec: Any, count: int) -> list[str]:
    """Distinct sources: each tunable moved to each of its other candidate values, one at a time."""
    source = spec.baseline.source
    tunables = find_tunables(source, spec.language, path=str(spec.kernel_path))
    current = current_assignment(tunables)
    out: list[str] = []
    for t in tunables:
        for value in t.candidates:
            if value == current[t.name]:
                continue
            variant = apply(source, {**current, t.name: value}, spec.language)
            if variant != source and variant not in out:
                out.append(variant)
            if len(out) >= count:
                return out
    return out


def cuda_variants(spec: Any, count: int, salt: str) -> list[str]:
    """Distinct CUDA sources (a #define in the kernel text): each needs its own nvcc build."""
    source = spec.baseline.source
    anchor = "#include <torch/extension.h>\n"
    if anchor not in source:
        raise SystemExit("rmsnorm_cuda.py changed: no '#include <torch/extension.h>' to add a variant after")
    return [source.replace(anchor, f"{anchor}#define KFORGE_VARIANT_{salt}_{i} {i}\n", 1) for i in range(count)]


def run_pool(spec: Any, sources: list[str], target: str, workers: int, settings: EvalSettings,
             compile_ahead: bool | None, cap_s: float) -> dict[str, Any]:
    """Evaluate `sources` on a pool of `workers` slots; stops handing out work after cap_s."""
    from kforge_bot.evaluate.api import new_seeds

    seeds = new_seeds(settings.seeds or spec.seeds)
    rows: list[dict[str, Any]] = []
    with EvalPool(target, workers=workers, compile_ahead=compile_ahead) as pool:
        devices = [d.describe() for d in pool.devices]
        # Warm-up: the slots start and compute the reference once (not counted: a run pays it once).
        warm = [pool.submit(spec, spec.baseline, settings, seeds) for _ in range(pool.size)]
        for f in warm:
            f.result()
        t0 = time.monotonic()
        futures = [pool.submit(spec, spec.candidate_from_source(s), settings, seeds) for s in sources]
        for f in futures:
            remaining = cap_s - (time.monotonic() - t0)  # the cap counts from the first candidate, not the warm-up
            try:
                r = f.result(timeout=max(1.0, remaining))
            except Exception as exc:  # noqa: BLE001 - a capped or failed job: recorded, not fatal
                rows.append({"verdict": "not finished", "error": f"{type(exc).__name__}: {exc}"[:200]})
                continue
            rows.append({"verdict": r.result.verdict, "eval_s": round(r.eval_s, 3), "queue_s": round(r.queue_s, 3),
                         "prepare": r.prepare, "prepare_s": round(r.prepare_s, 3) if r.prepare_s else None,
                         "slot": r.slot, "finished_s": round(r.finished - t0, 3), "reason": r.result.reason[:160]})
        wall = max((row.get("finished_s") or 0.0) for row in rows) if rows else 0.0
        for f in futures:
            f.cancel()
    done = [r for r in rows if "eval_s" in r]
    compile_sum = sum(r["prepare_s"] or 0.0 for r in done)
    eval_sum = sum(r["eval_s"] for r in done)
    serial = compile_sum + eval_sum
    return {"workers": workers, "devices": devices, "candidates": len(sources), "evaluated": len(done),
            "wall_s": round(wall, 2), "per_minute": round(len(done) / wall * 60, 2) if wall > 0 else None,
            "verdicts": {v: sum(1 for r in rows if r["verdict"] == v) for v in sorted({r["verdict"] for r in rows})},
            "compile_s_sum": round(compile_sum, 2), "evaluate_s_sum": round(eval_sum, 2),
            "compile_hidden": round(1 - wall / serial, 3) if compile_sum > 0 and serial > 0 else None,
            "rows": rows}


def run_loop(spec: Any, target: str, parallel: int, iterations: int, settings: EvalSettings,
             cap_s: float) -> dict[str, Any]:
    from kforge_bot.optimize.run import OptimizeRun, RunConfig
    from kforge_bot.policy import Budgets

    folder = Path(tempfile.mkdtemp(prefix="kforge-scale-loop-"))
    config = RunConfig(target=target, budgets=Budgets(iterations=iterations, time_limit_s=cap_s), settings=settings,
                       parallel=parallel, workers=parallel)
    run = OptimizeRun.open(spec, config, folder)
    started = time.monotonic()
    outcome = run.run()
    wall = time.monotonic() - started
    its = [it for it in outcome.record.completed if it.result is not None and not it.cached]
    loop_s = sum(it.overhead_s for it in its)
    eval_s = sum(it.eval_s for it in its)
    return {"parallel": parallel, "candidates": len(its), "wall_s": round(wall, 2), "stop": outcome.stop_reason,
            "loop_s_sum": round(loop_s, 4), "evaluate_s_sum": round(eval_s, 2),
            "loop_overhead_fraction": round(loop_s / eval_s, 5) if eval_s > 0 else None,
            "loop_s_per_candidate": round(loop_s / len(its), 4) if its else None, "report": str(folder)}


def markdown(data: dict[str, Any]) -> str:
    lines = [f"# Scale-out benchmark ({data['date']})", "",
             f"Host `{data['host']}`, target `{data['target']}`{' (smoke)' if data['smoke'] else ''}; devices: "
             + ", ".join(data["devices"]) + f". Python {data['python']}, torch {data['torch']}.", "",
             "| section | slots | candidates evaluated | wall s | candidates/min | compile s (sum) | evaluate s (sum) "
             "| compile hidden | verdicts |", "|---|---|---|---|---|---|---|---|---|"]
    for name, runs in data["sections"].items():
        if isinstance(runs, dict) and runs.get("skipped"):
            lines.append(f"| {name} | - | - | - | - | - | - | - | skipped: {runs['skipped']} |")
            continue
        for r in runs:
            hidden = f"{r['compile_hidden']:.0%}" if r.get("compile_hidden") is not None else "-"
            lines.append(f"| {name} | {r['workers']} | {r['evaluated']}/{r['candidates']} | {r['wall_s']} | "
                         f"{r['per_minute']} | {r['compile_s_sum']} | {r['evaluate_s_sum']} | {hidden} | "
                         + ", ".join(f"{k} {v}" for k, v in r["verdicts"].items()) + " |")
        if isinstance(runs, list) and len(runs) == 2 and runs[0].get("per_minute") and runs[1].get("per_minute"):
            lines.append(f"| {name} | scaling 1 -> 2 | | | {runs[1]['per_minute'] / runs[0]['per_minute']:.2f}x | | | | |")
    loop = data.get("loop")
    if loop and not loop.get("skipped"):
        frac = loop.get("loop_overhead_fraction")
        lines += ["", f"Loop overhead (tuner, --parallel {loop['parallel']}, {loop['candidates']} candidates): "
                      f"{loop['loop_s_per_candidate']} s per candidate, "
                      f"{frac:.3%} of evaluation time (target < 5%)." if frac is not None else
                  "", f"Loop stopped: {loop['stop']}"]
    elif loop:
        lines += ["", f"Loop overhead: skipped ({loop['skipped']})"]
    lines += ["", "Throughput counts candidates finished after a warm-up evaluation per slot (slot start and "
                  "reference run excluded). 'compile hidden' = 1 - wall / (sum of compile-ahead and evaluation "
                  "times): the share of the serial time that overlapped."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--smoke", action="store_true", help="tiny counts (CPU: proves the code path)")
    ap.add_argument("--max-devices", type=int, default=2)
    ap.add_argument("--triton-candidates", type=int, default=12)
    ap.add_argument("--cuda-candidates", type=int, default=6)
    ap.add_argument("--section-cap-s", type=float, default=75.0, help="time cap per pool run")
    args = ap.parse_args(argv)
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    found = discover_devices(args.target, None if args.target == "cuda" else args.max_devices)
    counts = [n for n in (1, 2) if n <= min(len(found), args.max_devices)]
    data: dict[str, Any] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                            "host": socket.gethostname(), "platform": platform.platform(), "target": args.target,
                            "smoke": args.smoke, "devices": [d.describe() for d in found],
                            "python": platform.python_version(), "torch": torch.__version__, "sections": {}}

    def save() -> None:
        (args.out / "scale_benchmark.json").write_text(json.dumps(data, indent=1))
        (args.out / "scale_benchmark.md").write_text(markdown(data))

    if args.target == "cpu":
        spec = load_spec(MANIFEST, "matmul_bias_relu_cpu")
        settings = EvalSettings(seeds=2, time_budget_s=0.3, timeout_s=180, profile=False)
        n = 2 if args.smoke else 8
        variants = tuner_variants(spec, n * len(counts))
        data["sections"]["cpu_c"] = [run_pool(spec, variants[i * n:(i + 1) * n], "cpu", w, settings, None,
                                              args.section_cap_s) for i, w in enumerate(counts)]
        save()
        data["sections"]["cuda"] = {"skipped": "CPU target: CUDA C++ builds need a GPU host"}
        loop_spec, loop_iters = spec, (2 if args.smoke else 4)
    else:
        settings = EvalSettings(seeds=2, time_budget_s=1.0, timeout_s=300)
        # Throughput is about the pool, not the kernels: one modest shape per kernel keeps each evaluation a
        # few seconds (the examples' own shapes spend ~40 s per evaluation checking 512 MiB outputs).
        spec = replace(load_spec(MANIFEST, "softmax_triton"), shape_sets=({"rows": 4096, "cols": 4096},))
        variants = tuner_variants(spec, args.triton_candidates * len(counts))
        n = min(args.triton_candidates, len(variants) // len(counts))
        data["sections"]["triton"] = [run_pool(spec, variants[i * n:(i + 1) * n], "cuda", w, settings, None,
                                               args.section_cap_s) for i, w in enumerate(counts)]
        save()
        cspec = replace(load_spec(MANIFEST, "rmsnorm_cuda"), shape_sets=({"rows": 4096, "cols": 4096},))
        data["sections"]["cuda"] = [run_pool(cspec, cuda_variants(cspec, args.cuda_candidates, f"w{w}"), "cuda", w,
                                             settings, True, args.section_cap_s * 1.6) for w in counts]
        save()
        loop_spec, loop_iters = spec, 2 * counts[-1]
        data["shapes"] = {"softmax_triton": spec.shape_sets, "rmsnorm_cuda": cspec.shape_sets}
    remaining = 300 - (time.monotonic() - start)
    if remaining > 40:
        data["loop"] = run_loop(loop_spec, args.target, counts[-1], loop_iters, settings, min(remaining - 10, 90))
    else:
        data["loop"] = {"skipped": f"time cap: {remaining:.0f} s left of 300"}
    data["total_s"] = round(time.monotonic() - start, 1)
    save()
    print(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
