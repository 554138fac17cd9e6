"""The baselines a model's run on KernelBench level 2's GEMM problems is scored against: per problem, the reference
against itself (A/A: the harness's noise), and the reference under torch.compile against the reference eager, so
that max(eager, compile) (the KForge paper's baseline) is known per problem.

    python benchmarks/l2_gemm_baselines.py --kernelbench .kb --target cuda --out $OUT [--gpus 8] [--max-autotune]
    python benchmarks/l2_gemm_baselines.py --problem-files tests/data/baselines/scale.py --target cpu --out /tmp/x

The selection (benchmarks/results/kernelbench_l2_gemm_selection.md) is applied to the carried KernelBench
(`.kb/KernelBench/level2`, fetched, never vendored) and must give exactly the committed list. Problems are spread
over the visible GPUs, one process per GPU, each running its share one after another (`--shard i/n` inside); the
parent merges the shares into `l2_gemm_baselines.jsonl` and `l2_gemm_baselines.md` under --out.
Every evaluation is kforge-bot's own (kforge_bot.evaluate: sandboxed workers, secret seeds, interleaved pairs);
the compiled baseline is the one `check --baseline compile` measures (kforge_bot.evaluate.baselines).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

SELECTION = Path(__file__).resolve().parent / "results" / "kernelbench_l2_gemm_selection.md"
GEMM = re.compile(r"nn\.Linear|F\.linear|torch\.matmul|torch\.mm\b|torch\.addmm|torch\.bmm|torch\.einsum|[^@]@[^@]")
CONV = re.compile(r"nn\.Conv|nn\.ConvTranspose|F\.conv|conv_transpose")


def committed_selection() -> list[str]:
    text = SELECTION.read_text()
    block = text.split("```", 2)[1]
    return [line.strip() for line in block.splitlines() if line.strip().endswith(".py")]


def model_source(path: Path) -> str:
    """The `Model` class's source (its __init__ and forward), read as text."""
    import ast

    source = path.read_text()
    tree = ast.parse(source)
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    return ast.get_source_segment(source, model) or ""


def select(level2: Path) -> list[str]:
    """The rule of kernelbench_l2_gemm_selection.md: a GEMM in Model, and no convolution."""
    found = []
    for path in sorted(level2.glob("*_*.py"), key=lambda p: int(p.name.split("_")[0])):
        model = model_source(path)
        if GEMM.search(model) and not CONV.search(model):
            found.append(path.name)
    return found


def measure(problem: Path, target: str, budget: float, timeout: float, kinds: list[str]) -> dict:
    """A/A and each compiled baseline against eager, one reference run for all (same secret seeds)."""
    from kforge_bot.evaluate.baselines import measure_compiled
    from kforge_bot.evaluate.session import EvaluationSession
    from kforge_bot.evaluate.wire.result import EvalSettings
    from kforge_bot.kernelspec import load_spec

    spec = load_spec(problem)
    settings = EvalSettings(timing_budget_s=budget, timeout_s=timeout)
    session = EvaluationSession(target, spec.seeds)
    row: dict = {"problem": problem.name}
    try:
        started = time.monotonic()
        aa = session.evaluate(spec, spec.baseline, settings)
        timing = (aa.details.get("timing") or [{}])[0]
        row["aa"] = {"verdict": aa.verdict, "reason": aa.reason[:300], "speedup": aa.speedup, "ci": aa.speedup_ci,
                     "eager_ms": aa.baseline.median_ms if aa.baseline else None, "mode": timing.get("mode"),
                     "pairs": timing.get("pairs"), "wall_s": round(time.monotonic() - started, 1)}
        row["device"] = aa.device_name
        for kind in kinds:
            started = time.monotonic()
            found = measure_compiled(spec, spec.baseline, [kind], session.evaluate, settings)[kind]
            over = found.speedup_over_eager.get(0)
            ci = found.ci_over_eager.get(0)
            row[kind] = {"verdict": found.verdict, "reason": found.reason[:300], "speedup_over_eager": over,
                         "ci": list(ci) if ci else None, "compiled_ms": found.median_ms.get(0),
                         "used": found.usable, "wall_s": round(time.monotonic() - started, 1)}
    except Exception as exc:  # noqa: BLE001 - one problem's failure is its row, the others still run
        row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    finally:
        session.close()
    return row


def run_shard(files: list[Path], shard: str, target: str, budget: float, timeout: float, kinds: list[str],
              out: Path) -> None:
    index, count = (int(x) for x in shard.split("/"))
    with out.open("a") as sink:
        for i, problem in enumerate(files):
            if i % count != index:
                continue
            row = measure(problem, target, budget, timeout, kinds)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(_line(row), flush=True)


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _line(row: dict) -> str:
    aa, comp = row.get("aa") or {}, row.get("compile") or {}
    return (f"{row['problem']}: A/A {aa.get('verdict')} {_num(aa.get('speedup'))} {aa.get('ci')}; compile "
            f"{comp.get('verdict')} {_num(comp.get('speedup_over_eager'))}x eager {row.get('error', '')}")


def table(rows: list[dict], kinds: list[str]) -> str:
    head = ["problem", "A/A (95% CI)", "eager ms"]
    for kind in kinds:
        head += [f"{kind} verdict", f"{kind} ms", f"{kind} vs eager (95% CI)"]
    head += ["max(eager, compile) vs eager", "faster"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    bests = []
    for row in sorted(rows, key=lambda r: (int(r["problem"].split("_")[0]) if r["problem"][0].isdigit() else 0,
                                           r["problem"])):
        aa = row.get("aa") or {}
        ci = aa.get("ci")
        cells = [row["problem"].removesuffix(".py"),
                 f"{_num(aa.get('speedup'))} ({_num(ci[0]) if ci else '-'}-{_num(ci[1]) if ci else '-'})"
                 if aa.get("verdict") == "pass" else f"{aa.get('verdict', row.get('error', '?'))}",
                 _num(aa.get("eager_ms"), 4)]
        best, faster = 1.0, "eager"
        for kind in kinds:
            entry = row.get(kind) or {}
            kci = entry.get("ci")
            cells += [str(entry.get("verdict", "-")), _num(entry.get("compiled_ms"), 4),
                      f"{_num(entry.get('speedup_over_eager'))} ({_num(kci[0]) if kci else '-'}-"
                      f"{_num(kci[1]) if kci else '-'})" if entry.get("used") else "dropped"]
            if entry.get("used") and (entry.get("speedup_over_eager") or 0) > best:
                best, faster = entry["speedup_over_eager"], kind
        if aa.get("verdict") == "pass":
            bests.append(best)
        cells += [_num(best), faster]
        lines.append("| " + " | ".join(cells) + " |")
    geo = math.exp(sum(math.log(b) for b in bests) / len(bests)) if bests else None
    lines.append("")
    lines.append(f"Geometric mean of max(eager, compile) over eager across {len(bests)} problems: {_num(geo)}x. "
                 "A model's kernel is scored by its speedup over eager divided by this per-problem figure.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, help="a KernelBench checkout (KernelBench/level2/ inside)")
    parser.add_argument("--problem-files", nargs="*", type=Path, default=[], help="problems to run instead (tests)")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--time-budget", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--max-autotune", action="store_true", help="also compile-max-autotune")
    parser.add_argument("--gpus", type=int, default=None, help="processes side by side (default: visible GPUs)")
    parser.add_argument("--limit", type=int, default=None, help="the first N selected problems only")
    parser.add_argument("--numbers", default="", help="these problem numbers only, comma-separated (a machine with "
                                                      "fewer GPUs runs the 37 in several calls)")
    parser.add_argument("--shard", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    kinds = ["compile"] + (["compile-max-autotune"] if args.max_autotune else [])
    args.out.mkdir(parents=True, exist_ok=True)
    if args.problem_files:
        files = list(args.problem_files)
    else:
        level2 = args.kernelbench / "KernelBench" / "level2"
        selected, committed = select(level2), committed_selection()
        if selected != committed:
            raise SystemExit(f"the selection rule gives {len(selected)} problems here, not the committed "
                             f"{len(committed)}: +{sorted(set(selected) - set(committed))} "
                             f"-{sorted(set(committed) - set(selected))}")
        files = [level2 / name for name in committed]
    if args.numbers:
        wanted = {int(n) for n in args.numbers.split(",") if n.strip()}
        files = [f for f in files if f.name.split("_")[0].isdigit() and int(f.name.split("_")[0]) in wanted]
    files = files[: args.limit] if args.limit else files
    if args.shard:  # a child: its share, appended to its own file
        run_shard(files, args.shard, args.target, args.time_budget, args.timeout, kinds,
                  args.out / f"shard_{args.shard.replace('/', '_of_')}.jsonl")
        return
    started = time.monotonic()
    gpus = args.gpus or (_visible_gpus() if args.target.startswith("cuda") else 1)
    gpus = max(1, min(gpus, len(files)))
    procs = []
    for i in range(gpus):
        env = dict(os.environ)
        if args.target.startswith("cuda") and gpus > 1:
            env["CUDA_VISIBLE_DEVICES"] = str(i)
        cmd = [sys.executable, __file__, "--shard", f"{i}/{gpus}", "--target", args.target, "--out", str(args.out),
               "--time-budget", str(args.time_budget), "--timeout", str(args.timeout)]
        cmd += ["--problem-files", *map(str, files)] if args.problem_files else ["--kernelbench", str(args.kernelbench)]
        cmd += ["--limit", str(args.limit)] if args.limit else []
        cmd += ["--numbers", args.numbers] if args.numbers else []
        cmd += ["--max-autotune"] if args.max_autotune else []
        procs.append(subprocess.Popen(cmd, env=env))
    codes = [p.wait() for p in procs]
    rows = []
    for shard in sorted(args.out.glob("shard_*.jsonl")):
        rows += [json.loads(line) for line in shard.read_text().splitlines() if line.strip()]
        shard.unlink()
    device = next((r.get("device") for r in rows if r.get("device")), args.target)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    (args.out / "l2_gemm_baselines.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = (f"# KernelBench level 2, GEMM problems: A/A and eager vs torch.compile\n\n{device}, {stamp}; "
            f"{len(rows)} of {len(files)} problems measured in {time.monotonic() - started:.0f} s on {gpus} "
            f"process(es) (exit codes {codes}); time budget {args.time_budget:g} s per evaluation.\n\n"
            + table(rows, kinds) + "\n")
    (args.out / "l2_gemm_baselines.md").write_text(text)
    print(text)


def _visible_gpus() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 1
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    return len(visible.split(",")) if visible else max(1, count)


if __name__ == "__main__":
    main()
