"""Scale-out benchmark: candidate throughput of the evaluation pool (local slots and Ray) with 1 and 2 devices,
compile hidden by compile-ahead, a crashing candidate, and `optimize --parallel 4`'s own overhead.

    PYTHONPATH=$PWD python3 benchmarks/scale_benchmark.py --out DIR                        # every section (~25 min)
    PYTHONPATH=$PWD python3 benchmarks/scale_benchmark.py --sections triton,cuda --out DIR  # some of them
    PYTHONPATH=$PWD python3 benchmarks/scale_benchmark.py --target cpu --smoke --out DIR    # proves the path

Sections (each capped by candidate count and by time; devices: 1, and 2 where the host has them):
- triton / ray-triton: distinct Triton softmax kernels (examples/triton/softmax.py: the tuner's NUM_WARPS
  values, each with its own comment inside the @triton.jit body, so each is JIT-compiled afresh as an LLM's
  new kernel would be) through the local pool / through Ray on this host: candidates per minute.
- cuda / ray-cuda: distinct CUDA C++ kernels (examples/cuda/rmsnorm_cuda.py with a #define added, so each
  needs its own load_inline build). The local pool compiles them ahead on the CPU cores; Ray actors build in
  the evaluation itself. "hidden" = 1 - wall / (compile + evaluate summed): the serial time that overlapped.
- cuda-inslot: the local pool with compile-ahead off on one device: the same builds inside the evaluations,
  the side-by-side baseline for what compile-ahead saves.
- After each pool run, one crashing candidate (it reads address 0: SIGSEGV) and one more good one:
  the crash gets a verdict and the next candidate still runs (slots replaced, if any, are counted).
- loop: `optimize`'s loop with the built-in tuner, --parallel 4 on every device: which slot each candidate
  ran on, each slot's busy time, and the loop's own time per candidate against the evaluation time.
Needs torch (and triton on GPUs); ray for the ray-* sections (skipped, and said so, without it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kforge_bot.evaluate.wire.result import EvalSettings  # noqa: E402
from kforge_bot.scaleout import make_pool  # noqa: E402
from kforge_bot.scaleout.devices import discover_devices  # noqa: E402
from kforge_bot.kernelspec import load_spec  # noqa: E402
from kforge_bot.tuner.tunables import apply, current_assignment, find_tunables  # noqa: E402

MANIFEST = REPO / "examples" / "kforge.yaml"
GPU_SECTIONS = ("triton", "cuda", "cuda-inslot", "loop", "ray-triton", "ray-cuda")
CPU_SECTIONS = ("cpu", "loop", "ray-cpu")
CRASH = "\nimport ctypes as _ctypes\n_ctypes.string_at(0)  # scale benchmark: a candidate that segfaults\n"


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


def salted(sources: list[str], anchor: str, line: str, count: int, salt: str) -> list[str]:
    """`count` distinct sources: the given ones in turn, each with `line` (formatted with a unique tag) added
    after `anchor`, so no two share a build or a JIT cache entry."""
    if not sources or any(anchor not in s for s in sources):
        raise SystemExit(f"the example changed: no {anchor!r} to add a variant after")
    return [sources[i % len(sources)].replace(anchor, anchor + line.format(tag=f"{salt}_{i}"), 1) for i in range(count)]


def triton_variants(spec: Any, count: int, salt: str) -> list[str]:
    return salted([spec.baseline.source] + tuner_variants(spec, 16), "    row = tl.program_id(0)\n",
                  "    # kforge scale variant {tag}\n", count, salt)


def cuda_variants(spec: Any, count: int, salt: str) -> list[str]:
    return salted([spec.baseline.source], "#include <torch/extension.h>\n", "#define KFORGE_VARIANT_{tag} 1\n",
                  count, salt)


def describe_pool(pool: Any) -> list[str]:
    if hasattr(pool, "devices"):
        return [d.describe() for d in pool.devices]
    return [f"Ray actor {i}: node {p['node'][:8]}, GPU ids {p['gpu_ids']}, CUDA_VISIBLE_DEVICES={p['visible']!r}"
            for i, p in enumerate(pool.places)]


def row_of(r: Any, t0: float) -> dict[str, Any]:
    return {"verdict": r.result.verdict, "eval_s": round(r.eval_s, 3), "queue_s": round(r.queue_s, 3),
            "prepare": r.prepare, "prepare_s": round(r.prepare_s, 3) if r.prepare_s else None, "slot": r.slot,
            "device": r.device, "finished_s": round(r.finished - t0, 3), "reason": r.result.reason[:160]}


def run_pool(spec: Any, sources: list[str], target: str, workers: int, settings: EvalSettings, *,
             executor: str = "local", compile_ahead: bool | None = None, cap_s: float,
             crash_check: bool = True, scratch: Path | None = None) -> dict[str, Any]:
    """Evaluate `sources` on a pool of `workers` slots (stops waiting after cap_s), then (`crash_check`) a
    crashing candidate and one more good one on the same pool."""
    from kforge_bot.evaluate.api import new_seeds
    from kforge_bot.scaleout.pool import EvalPool

    seeds = new_seeds(settings.seed_count(spec.seeds))
    rows: list[dict[str, Any]] = []
    opened = time.monotonic()
    pool = (EvalPool(target, workers=workers, compile_ahead=compile_ahead, scratch=scratch) if executor == "local"
            else make_pool(target, executor=executor, workers=workers))
    with pool:
        devices = describe_pool(pool)
        # Warm-up: the slots start and compute the reference once (not counted: a run pays it once).
        warm = [pool.submit(spec, spec.baseline, settings, seeds) for _ in range(pool.size)]
        for f in warm:
            f.result()
        warm_s = time.monotonic() - opened
        t0 = time.monotonic()
        futures = [pool.submit(spec, spec.candidate_from_source(s), settings, seeds) for s in sources]
        for f in futures:
            remaining = cap_s - (time.monotonic() - t0)  # the cap counts from the first candidate, not the warm-up
            try:
                rows.append(row_of(f.result(timeout=max(1.0, remaining)), t0))
            except Exception as exc:  # noqa: BLE001 - a capped or failed job: recorded, not fatal
                rows.append({"verdict": "not finished", "error": f"{type(exc).__name__}: {exc}"[:200]})
        wall = max((row.get("finished_s") or 0.0) for row in rows) if rows else 0.0
        for f in futures:
            f.cancel()
        # Survival: a candidate that crashes its own process, then a good one on the same pool.
        after: list[dict[str, Any]] = []
        t1 = time.monotonic()
        for source in (sources[0] + CRASH, sources[0]) if crash_check else ():
            try:
                after.append(row_of(pool.submit(spec, spec.candidate_from_source(source), settings, seeds)
                                    .result(timeout=settings.timeout_s + 300), t1))
            except Exception as exc:  # noqa: BLE001
                after.append({"verdict": "not finished", "error": f"{type(exc).__name__}: {exc}"[:200]})
        replaced = getattr(pool, "replaced", 0)
    done = [r for r in rows if "eval_s" in r]
    compile_sum = sum(r["prepare_s"] or 0.0 for r in done)
    eval_sum = sum(r["eval_s"] for r in done)
    serial = compile_sum + eval_sum
    busy: dict[str, float] = {}
    for r in done:
        busy[str(r["slot"])] = round(busy.get(str(r["slot"]), 0.0) + r["eval_s"], 2)
    return {"executor": executor, "compile_ahead": compile_ahead, "workers": workers, "devices": devices,
            "warm_up_s": round(warm_s, 1), "candidates": len(sources), "evaluated": len(done),
            "wall_s": round(wall, 2), "per_minute": round(len(done) / wall * 60, 2) if wall > 0 else None,
            "verdicts": {v: sum(1 for r in rows if r["verdict"] == v) for v in sorted({r["verdict"] for r in rows})},
            "compile_s_sum": round(compile_sum, 2), "evaluate_s_sum": round(eval_sum, 2),
            "compile_hidden": round(1 - wall / serial, 3) if compile_sum > 0 and serial > 0 else None,
            "busy_s_by_slot": busy, "crash_then_good": [r["verdict"] for r in after], "slots_replaced": replaced,
            "rows": rows, "after": after}


def run_loop(spec: Any, target: str, parallel: int, workers: int, iterations: int, settings: EvalSettings,
             cap_s: float) -> dict[str, Any]:
    from kforge_bot.optimize.run import OptimizeRun, RunConfig
    from kforge_bot.config.policy import Budgets

    folder = Path(tempfile.mkdtemp(prefix="kforge-scale-loop-"))
    config = RunConfig(target=target, budgets=Budgets(iterations=iterations, time_limit_s=cap_s), settings=settings,
                       parallel=parallel, workers=workers)
    run = OptimizeRun.open(spec, config, folder)
    started = time.monotonic()
    outcome = run.run()
    wall = time.monotonic() - started
    its = [it for it in outcome.record.completed if it.result is not None and not it.cached]
    loop_s = sum(it.overhead_s for it in its)
    eval_s = sum(it.eval_s for it in its)
    slots = [((it.result.get("details") or {}).get("pool") or {}).get("slot") for it in its]
    busy: dict[str, float] = {}
    for slot, it in zip(slots, its):
        busy[str(slot)] = round(busy.get(str(slot), 0.0) + it.eval_s, 2)
    return {"parallel": parallel, "workers": workers, "candidates": len(its), "wall_s": round(wall, 2),
            "stop": outcome.stop_reason, "slots": slots, "busy_s_by_slot": busy,
            "verdicts": [it.result.get("verdict") for it in its],
            "loop_s_sum": round(loop_s, 4), "evaluate_s_sum": round(eval_s, 2),
            "loop_overhead_fraction": round(loop_s / eval_s, 5) if eval_s > 0 else None,
            "loop_s_per_candidate": round(loop_s / len(its), 4) if its else None, "report": str(folder)}


def markdown(data: dict[str, Any]) -> str:
    lines = [f"# Scale-out benchmark ({data['date']})", "",
             f"Host `{data['host']}`, target `{data['target']}`{' (smoke)' if data['smoke'] else ''}; devices: "
             + ", ".join(data["devices"]) + f". Python {data['python']}, torch {data['torch']}.", "",
             "| section | executor | slots | candidates evaluated | wall s | candidates/min | compile s (sum) "
             "| evaluate s (sum) | compile hidden | busy s by slot | verdicts | crash, then a good one |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, runs in data["sections"].items():
        if isinstance(runs, dict):
            lines.append(f"| {name} | | | | | | | | | | skipped: {runs['skipped']} | |")
            continue
        for r in runs:
            hidden = f"{r['compile_hidden']:.0%}" if r.get("compile_hidden") is not None else "-"
            ahead = {True: ", compile-ahead", False: ", builds in the slot"}.get(r.get("compile_ahead"), "")
            lines.append(f"| {name} | {r['executor']}{ahead} | {r['workers']} | {r['evaluated']}/{r['candidates']} | "
                         f"{r['wall_s']} | {r['per_minute']} | {r['compile_s_sum']} | {r['evaluate_s_sum']} | {hidden} "
                         f"| {json.dumps(r['busy_s_by_slot'])} | "
                         + ", ".join(f"{k} {v}" for k, v in r["verdicts"].items())
                         + f" | {' then '.join(r['crash_then_good']) or 'not run'}"
                         + (f" ({r['slots_replaced']} slot(s) replaced)" if r["slots_replaced"] else "") + " |")
        if len(runs) == 2 and runs[0].get("per_minute") and runs[1].get("per_minute"):
            lines.append(f"| {name} | scaling 1 -> 2 | | | | {runs[1]['per_minute'] / runs[0]['per_minute']:.2f}x "
                         "| | | | | | |")
    loop = data.get("loop")
    if loop and not loop.get("skipped"):
        frac = loop.get("loop_overhead_fraction")
        lines += ["", f"Loop (`optimize`, built-in tuner, --parallel {loop['parallel']} on {loop['workers']} slot(s)): "
                      f"{loop['candidates']} candidates, slots {loop['slots']}, busy s by slot "
                      f"{json.dumps(loop['busy_s_by_slot'])}; the loop's own time {loop['loop_s_per_candidate']} s "
                      "per candidate" + (f", {frac:.3%} of evaluation time (target < 5%)." if frac is not None else "."),
                  f"Loop stopped: {loop['stop']}"]
    elif loop:
        lines += ["", f"Loop: skipped ({loop['skipped']})"]
    lines += ["", "Throughput counts candidates finished after a warm-up evaluation per slot (slot start and "
                  "reference run excluded). 'compile hidden' = 1 - wall / (sum of compile-ahead and evaluation "
                  "times): the share of the serial time that overlapped. The crashing candidate and the good one "
                  "after it (Triton and CPU sections) run once the timed batch is done and are not counted in it."]
    return "\n".join(lines) + "\n"


def ray_missing() -> str | None:
    try:
        import ray  # noqa: F401 - optional: the ray-* sections only
    except ImportError:
        return "ray is not installed (pip install 'kforge-bot[ray]')"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--sections", default=None, help="comma-separated; default: all for the target "
                    f"(cuda: {','.join(GPU_SECTIONS)}; cpu: {','.join(CPU_SECTIONS)})")
    ap.add_argument("--smoke", action="store_true", help="tiny counts (CPU: proves the code path)")
    ap.add_argument("--max-devices", type=int, default=2)
    ap.add_argument("--triton-candidates", type=int, default=12)
    ap.add_argument("--cuda-candidates", type=int, default=6)
    ap.add_argument("--inslot-candidates", type=int, default=3)
    ap.add_argument("--section-cap-s", type=float, default=75.0, help="time cap per Triton or CPU pool run")
    ap.add_argument("--cuda-cap-s", type=float, default=300.0, help="time cap per CUDA C++ pool run")
    args = ap.parse_args(argv)
    import torch

    known = GPU_SECTIONS if args.target == "cuda" else CPU_SECTIONS
    wanted = args.sections.split(",") if args.sections else list(known)
    unknown = [s for s in wanted if s not in known]
    if unknown:
        ap.error(f"unknown section(s) for --target {args.target}: {', '.join(unknown)} (known: {', '.join(known)})")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    found = discover_devices(args.target, None if args.target == "cuda" else args.max_devices)
    counts = [n for n in (1, 2) if n <= min(len(found), args.max_devices)]
    data: dict[str, Any] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                            "host": socket.gethostname(), "platform": platform.platform(), "target": args.target,
                            "smoke": args.smoke, "devices": [d.describe() for d in found], "device_counts": counts,
                            "python": platform.python_version(), "torch": torch.__version__, "sections": {}}

    def save() -> None:
        (args.out / "scale_benchmark.json").write_text(json.dumps(data, indent=1))
        (args.out / "scale_benchmark.md").write_text(markdown(data))

    def pools(name: str, spec: Any, make: Any, n: int, cap_s: float, **kw: Any) -> None:
        if name not in wanted:
            return
        if kw.get("executor") == "ray" and ray_missing():
            data["sections"][name] = {"skipped": ray_missing()}
        else:
            data["sections"][name] = [run_pool(spec, make(spec, n, f"{name.replace('-', '_')}_w{w}"), args.target, w,
                                               settings, cap_s=cap_s, **kw) for w in counts]
        save()
        print(f"[{time.monotonic() - start:.0f} s] {name} done", flush=True)

    def loop(spec: Any, iterations: int) -> None:
        if "loop" in wanted:
            data["loop"] = run_loop(spec, args.target, 4, counts[-1], iterations, settings, 120.0)
            save()
            print(f"[{time.monotonic() - start:.0f} s] loop done", flush=True)

    if args.target == "cpu":
        spec = load_spec(MANIFEST, "matmul_bias_relu_cpu")
        settings = EvalSettings(seeds=2, timing_budget_s=0.3, timeout_s=180, profile=False)
        n = 2 if args.smoke else 8

        def cpu_variants(spec: Any, count: int, salt: str) -> list[str]:
            return salted(tuner_variants(spec, 16), "import torch\n", "# kforge scale variant {tag}\n", count, salt)

        pools("cpu", spec, cpu_variants, n, args.section_cap_s)
        loop(spec, 2 if args.smoke else 4)
        pools("ray-cpu", spec, cpu_variants, n, args.section_cap_s, executor="ray")
    else:
        settings = EvalSettings(seeds=2, timing_budget_s=1.0, timeout_s=300)
        # Throughput is about the pool, not the kernels: one modest shape per kernel keeps each evaluation a
        # few seconds (the examples' own shapes spend ~40 s per evaluation checking 512 MiB outputs).
        spec = replace(load_spec(MANIFEST, "softmax_triton"), shape_sets=({"rows": 4096, "cols": 4096},))
        cspec = replace(load_spec(MANIFEST, "rmsnorm_cuda"), shape_sets=({"rows": 4096, "cols": 4096},))
        data["shapes"] = {"softmax_triton": spec.shape_sets, "rmsnorm_cuda": cspec.shape_sets}
        cuda_cap = args.cuda_cap_s
        # The local CUDA runs share one extensions folder: the kernel as written is built once (every candidate
        # is a distinct source, so each still builds its own extension).
        shared = Path(tempfile.mkdtemp(prefix="kforge-scale-ext-"))
        pools("triton", spec, triton_variants, args.triton_candidates, args.section_cap_s)
        pools("cuda", cspec, cuda_variants, args.cuda_candidates, cuda_cap, compile_ahead=True, crash_check=False,
              scratch=shared)
        if "cuda-inslot" in wanted:  # one device: the side-by-side baseline, not a scaling figure
            data["sections"]["cuda-inslot"] = [run_pool(cspec, cuda_variants(cspec, args.inslot_candidates, "inslot"),
                                                        "cuda", 1, settings, compile_ahead=False, cap_s=cuda_cap,
                                                        crash_check=False, scratch=shared)]
            save()
        loop(spec, 8)
        pools("ray-triton", spec, triton_variants, args.triton_candidates, args.section_cap_s, executor="ray")
        pools("ray-cuda", cspec, cuda_variants, args.inslot_candidates, cuda_cap, executor="ray", crash_check=False)
        shutil.rmtree(shared, ignore_errors=True)
    data["total_s"] = round(time.monotonic() - start, 1)
    save()
    print(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
