"""Verdicts that hold on a busy machine (issue 40): the bundled CPU kernel beside busy loops, and the gate's A/A
false-alarm rate beside them.

Part 1 (`table`): examples/kforge.yaml's matmul_bias_relu_cpu against its reference (what `kforge-bot check` runs,
with its quick settings), beside 0, 1, 2, 3 busy loops (`python -c "while True: pass"`), N runs each, each through
the optimize loop's evaluator with a result cache of its own. A run is right where its interval contains the idle
figure or its verdict is `inconclusive`; the cache must hold nothing disturbed (every stored entry is a `pass`, with
its conditions).

Part 2 (`aa`): the gate's own decision (kforge_bot.gate.compare: confirmation run, retry of a disturbed timing)
on the same kernel as base and head, N decisions beside busy loops; a `regression` or `improved` is a false alarm,
an `inconclusive` is no verdict (it fails the gate under the default policy: counted apart).

Every row keeps the machine's load and each side's conditions (evaluate.wire.conditions), so a result file says what the
machine was doing. The idle figure comes from --idle-figure, else from this run's undisturbed 0-loop runs.

    python benchmarks/disturbed_timing.py --runs 10 --loops 0,1,2,3 --aa 50 --aa-loops 2 \
        --out benchmarks/results/disturbed_timing_cpu          # the issue's full table: about an hour on 2 cores
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kforge_bot.cache import ResultCache  # noqa: E402
from kforge_bot.targets.fingerprint import probe_fingerprint  # noqa: E402
from kforge_bot.config.policy import load_policy  # noqa: E402
from kforge_bot.evaluate.api import evaluate, new_seeds  # noqa: E402
from kforge_bot.evaluate.wire.conditions import disturbance  # noqa: E402
from kforge_bot.evaluate.references import ReferenceStore  # noqa: E402
from kforge_bot.gate.measure import compare, gate_settings  # noqa: E402
from kforge_bot.optimize.evaluator import HarnessEvaluator  # noqa: E402
from kforge_bot.kernelspec import load_spec  # noqa: E402

KERNEL = "matmul_bias_relu_cpu"
MANIFEST = REPO / "examples" / "kforge.yaml"


@contextmanager
def busy_loops(n: int) -> Iterator[None]:
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5 if n else 0.0)
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "load_1m": round(load[0], 2),
            "python": platform.python_version()}


def conditions_of(result: Any) -> dict[str, Any]:
    shown = result.details.get("conditions") or {}
    sides = {}
    for entry in shown.get("per_shape") or []:
        for side in ("baseline", "candidate"):
            s = entry.get(side) or {}
            sides.setdefault(side, []).append({k: s.get(k) for k in ("preempted_share", "busy_threads", "crowded_share",
                                                                      "runnable_median", "wait_share")})
    return {"disturbed": shown.get("disturbed"), "threads": shown.get("threads"), "sides": sides}


def table(args: argparse.Namespace, out: dict[str, Any], save: Any) -> None:
    # As `kforge-bot check` runs it: the kernel as written against its reference (torch's matmul).
    kernel = load_spec(MANIFEST, KERNEL)
    spec = kernel.with_baseline(kernel.reference)
    settings = replace(load_policy(None).eval_settings("check", quick=True), cpu_threads=args.cpu_threads)
    fingerprint = probe_fingerprint("cpu")
    rows = out.setdefault("table", [])
    for loops in args.loops:
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="kforge-bench-cache-") as folder, busy_loops(loops):
                cache = ResultCache(folder)
                evaluator = HarnessEvaluator(spec, "cpu", settings, cache=cache, fingerprint=fingerprint)
                before = machine()
                try:
                    result, seconds = evaluator(kernel.baseline)
                finally:
                    evaluator.close()
                stored = [json.loads(p.read_text()) for p in Path(folder).rglob("*.json")]
            row = {"loops": loops, "run": run, "verdict": result.verdict, "speedup": result.speedup,
                   "speedup_ci": list(result.speedup_ci) if result.speedup_ci else None,
                   "reason": result.reason, "seconds": round(seconds, 2), "machine": before,
                   "conditions": conditions_of(result), "cached_entries": len(stored),
                   "cached_verdicts": [_verdict_of(e) for e in stored]}
            print(json.dumps({k: row[k] for k in ("loops", "run", "verdict", "speedup", "speedup_ci",
                                                  "cached_entries")} | {"disturbed": row["conditions"]["disturbed"]}),
                  flush=True)
            rows.append(row)
            save()


def _verdict_of(entry: dict[str, Any]) -> str:
    for key in ("result", "record"):
        if isinstance(entry.get(key), dict) and "verdict" in entry[key]:
            return entry[key]["verdict"]
    return str(entry.get("verdict", "?"))


def judge_table(out: dict[str, Any], idle: float | None) -> None:
    rows = out.get("table") or []
    if idle is None:
        clean = [r["speedup"] for r in rows if r["loops"] == 0 and r["verdict"] == "pass" and r["speedup"]]
        idle = statistics.median(clean) if clean else None
    out["idle_figure"] = idle
    summary = {}
    for loops in sorted({r["loops"] for r in rows}):
        mine = [r for r in rows if r["loops"] == loops]
        holds = [r for r in mine if idle is not None and r["speedup_ci"] and r["speedup_ci"][0] <= idle
                 <= r["speedup_ci"][1]]
        summary[loops] = {
            "runs": len(mine), "inconclusive": sum(1 for r in mine if r["verdict"] == "inconclusive"),
            "pass_containing_idle": sum(1 for r in holds if r["verdict"] == "pass"),
            "pass_missing_idle": sum(1 for r in mine if r["verdict"] == "pass" and r not in holds),
            "other": sum(1 for r in mine if r["verdict"] not in ("pass", "inconclusive")),
            "disturbed_cached": sum(1 for r in mine if r["verdict"] != "pass" and r["cached_entries"]),
            "load_1m": [r["machine"]["load_1m"] for r in mine]}
    out["table_summary"] = summary


def aa(args: argparse.Namespace, out: dict[str, Any], save: Any) -> None:
    spec = load_spec(MANIFEST, KERNEL)
    policy = load_policy(None)
    rule = policy.rule_for(KERNEL, spec.kernel_file, "cpu")
    settings = replace(gate_settings(policy, rule), cpu_threads=args.cpu_threads)
    store, seeds = ReferenceStore(), new_seeds(settings.seed_count(spec.seeds))
    rows = out.setdefault("aa", [])
    try:
        with busy_loops(args.aa_loops):
            for i in range(args.aa):
                before = machine()
                m = compare(spec, spec.baseline, spec.baseline, "cpu", settings, rule.threshold, references=store,
                            seeds=seeds)
                r = m.result
                row = {"decision": i, "verdict": m.verdict, "reason": m.reason, "runs": m.runs,
                       "wall_s": round(m.wall_s, 1), "speedup": r.speedup if r else None,
                       "speedup_ci": list(r.speedup_ci) if r and r.speedup_ci else None, "machine": before,
                       "conditions": conditions_of(r) if r else {}}
                print(json.dumps({k: row[k] for k in ("decision", "verdict", "runs", "speedup", "speedup_ci")}),
                      flush=True)
                rows.append(row)
                counts: dict[str, int] = {}
                for x in rows:
                    counts[x["verdict"]] = counts.get(x["verdict"], 0) + 1
                out["aa_summary"] = {"decisions": len(rows), "busy_loops": args.aa_loops, "threshold": rule.threshold,
                                     "verdicts": counts,
                                     "false_alarms": counts.get("regression", 0) + counts.get("improved", 0)}
                save()
    finally:
        store.cleanup()


def canary(args: argparse.Namespace, out: dict[str, Any], save: Any) -> None:
    """The A/A canary as a detector, measured: the reference against itself (the detector's limits off, so its
    interval is what a canary would read), then the kernel against the reference, beside the same busy loops. A
    canary reads a disturbance only where the load hits its two sides differently; its two sides are alike."""
    spec = load_spec(MANIFEST, KERNEL)
    quick = load_policy(None).eval_settings("check", quick=True)
    off = replace(quick, max_preempted_share=1.0, max_preempted_gap=1.0, max_crowded_share=1.0,
                  max_wait_share=1.0)
    rows = out.setdefault("canary", [])
    with busy_loops(args.canary_loops):
        for i in range(args.canary):
            aa = evaluate(spec, spec.reference, "cpu", off, baseline=spec.reference)
            kernel = evaluate(spec, spec.baseline, "cpu", quick, baseline=spec.reference)
            aa_sides = [{k: e.get(k) for k in ("baseline", "candidate")}
                        for e in (aa.details.get("conditions") or {}).get("per_shape") or []]
            row = {"run": i, "loops": args.canary_loops, "canary_ci": list(aa.speedup_ci) if aa.speedup_ci else None,
                   "canary_holds_1": bool(aa.speedup_ci and aa.speedup_ci[0] <= 1.0 <= aa.speedup_ci[1]),
                   "canary_conditions_flag": next((d for d in (disturbance(s) for s in aa_sides) if d), None),
                   "kernel_verdict": kernel.verdict,
                   "kernel_ci": list(kernel.speedup_ci) if kernel.speedup_ci else None,
                   "kernel_disturbed": (kernel.details.get("conditions") or {}).get("disturbed"),
                   "machine": machine()}
            print(json.dumps({k: row[k] for k in ("run", "canary_ci", "canary_holds_1", "kernel_verdict",
                                                  "kernel_ci")}), flush=True)
            rows.append(row)
            save()


def render_md(out: dict[str, Any]) -> str:
    threads = out.get("cpu_threads")
    lines = [f"# Disturbed timing on the CPU ({out['date']})", "",
             f"Machine: {out['machine']}. {out.get('note', '')}", "",
             f"Threads per worker: {threads} (evaluation.cpu_threads)" if threads else
             "Threads per worker: the framework's default", ""]
    if out.get("table_summary"):
        lines += [f"Idle figure: {out.get('idle_figure')}", "",
                  "| busy loops | runs | inconclusive | pass, interval holds idle | pass, interval misses idle | other "
                  "| disturbed in cache | load (1 min) |", "|---|---|---|---|---|---|---|---|"]
        for loops, s in out["table_summary"].items():
            lines.append(f"| {loops} | {s['runs']} | {s['inconclusive']} | {s['pass_containing_idle']} | "
                         f"{s['pass_missing_idle']} | {s['other']} | {s['disturbed_cached']} | {s['load_1m']} |")
        lines += ["", "| loops | run | verdict | speedup | interval | disturbed | threads |", "|---|---|---|---|---|---|---|"]
        for r in out["table"]:
            ci = r["speedup_ci"]
            lines.append(f"| {r['loops']} | {r['run']} | {r['verdict']} | "
                         f"{r['speedup'] and round(r['speedup'], 3)} | {ci and [round(c, 3) for c in ci]} | "
                         f"{r['conditions']['disturbed'] or ''} | {r['conditions']['threads'] or ''} |")
    if out.get("canary"):
        lines += ["", "## The A/A canary (the reference against itself) beside busy loops", "",
                  "| run | canary interval | canary holds 1 | conditions on the canary's run | kernel verdict | "
                  "kernel interval |", "|---|---|---|---|---|---|"]
        for r in out["canary"]:
            lines.append(f"| {r['run']} | {r['canary_ci'] and [round(c, 3) for c in r['canary_ci']]} | "
                         f"{r['canary_holds_1']} | {r['canary_conditions_flag'] or ''} | {r['kernel_verdict']} | "
                         f"{r['kernel_ci'] and [round(c, 3) for c in r['kernel_ci']]} |")
    if out.get("aa_summary"):
        s = out["aa_summary"]
        lines += ["", f"## Gate A/A beside {s['busy_loops']} busy loops", "",
                  f"{s['decisions']} decisions at the {s['threshold']:.0%} threshold: {s['verdicts']}; "
                  f"false alarms (regression or improved): {s['false_alarms']}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # busy loops are ended on the way out
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--loops", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2, 3])
    parser.add_argument("--aa", type=int, default=50, help="gate A/A decisions (0: none)")
    parser.add_argument("--aa-loops", type=int, default=2)
    parser.add_argument("--canary", type=int, default=0, help="A/A canary runs (reference against itself)")
    parser.add_argument("--canary-loops", type=int, default=3)
    parser.add_argument("--idle-figure", type=float, default=None)
    parser.add_argument("--cpu-threads", type=int, default=None,
                        help="the policy's evaluation.cpu_threads for both parts (a runner that shares its cores)")
    parser.add_argument("--note", default="", help="what else the machine was doing")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "disturbed_timing_cpu")
    args = parser.parse_args()
    out: dict[str, Any] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                           "machine": machine(), "note": args.note, "argv": sys.argv[1:],
                           "cpu_threads": args.cpu_threads}

    def save() -> None:
        judge_table(out, args.idle_figure)
        args.out.with_suffix(".json").write_text(json.dumps(out, indent=1))
        args.out.with_suffix(".md").write_text(render_md(out))

    if args.runs:
        table(args, out, save)
    if args.canary:
        canary(args, out, save)
    if args.aa:
        aa(args, out, save)
    save()


if __name__ == "__main__":
    main()
