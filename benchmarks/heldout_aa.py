"""KernelBench A/A with held-out shapes and values on (issue 42): does every problem's reference run its variants,
and is the kernel against itself still `pass`?

Per problem: `evaluate(Model vs Model)` with held-out variants on (correctness only, unless --measure), recording the
verdict (an A/A must pass: anything else is the harness turning an honest kernel away), each variant's sizes and
whether the reference ran it as drawn, with its batch alone moved, or not at all (and why). With --cost-every K,
every K-th problem is also evaluated as `check` does (timing on) with variants on and off, for the seconds they add.
Rows go to a JSONL file as they finish; a Markdown table at the end. --shard i/n takes every n-th problem from i, so
several GPUs can share a level (run_h200.sh's `heldout` step starts one per GPU).

    python benchmarks/heldout_aa.py --kernelbench .kb --problems 1/all,2/all --out OUT [--shard 0/8] [--cost-every 10]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from kforge_bot.errors import KforgeError  # noqa: E402
from kforge_bot.evaluate.api import evaluate  # noqa: E402
from kforge_bot.evaluate.wire.result import EvalSettings  # noqa: E402
from kforge_bot.kernelspec import load_spec  # noqa: E402


def expand(root: Path, problems: str) -> list[Path]:
    """`1/all` is every problem of level 1, `2/12` one problem; in number order."""
    files: list[Path] = []
    for item in problems.split(","):
        level, _, number = item.partition("/")
        folder = root / "KernelBench" / f"level{level}"
        found = sorted(folder.glob("*_*.py"), key=lambda f: int(f.name.split("_")[0]))
        files += found if number == "all" else [f for f in found if f.name.split("_")[0] == number]
    return files


def variants_text(heldout: list[dict]) -> str:
    parts = []
    for v in heldout:
        sizes = ", ".join(f"{k}={s}" for k, s in v["sizes"].items())
        if v.get("skipped"):
            parts.append(f"{v['variant']}: skipped ({v['skipped'][:120]})")
        elif v.get("reference_could_not_run"):
            parts.append(f"{v['variant']}: {sizes} after {len(v['reference_could_not_run'])} form(s) the reference "
                         f"could not run ({v['reference_could_not_run'][0][:80]})")
        else:
            parts.append(f"{v['variant']}: {sizes}")
    return "; ".join(parts).replace("|", "/")


def judge_one(problem: Path, target: str, measure: bool, budget: float, cost: bool) -> dict:
    name = f"{problem.parent.name.removeprefix('level')}/{problem.name}"
    row: dict = {"problem": name}
    try:
        spec = load_spec(problem)
        settings = EvalSettings(measure=measure, profile=False, timing_budget_s=budget)
        started = time.monotonic()
        result = evaluate(spec, spec.baseline, target, settings)
        row.update(verdict=result.verdict, reason=result.reason[:400], wall_s=round(time.monotonic() - started, 2),
                   heldout=result.correctness.get("heldout") or [],
                   heldout_reference_s=((result.details.get("phases") or {}).get("reference_worker") or {})
                   .get("heldout_s"))
        if cost:  # as check runs it: timing on, variants on and off
            full = EvalSettings(profile=False, timing_budget_s=budget)
            for mode in ("on", "off"):
                began = time.monotonic()
                again = evaluate(spec, spec.baseline, target, replace(full, heldout=mode == "on"))
                row[f"check_{mode}_s"] = round(time.monotonic() - began, 2)
                row[f"check_{mode}_verdict"] = again.verdict
    except KforgeError as exc:
        row.update(verdict="error", reason=str(exc)[:400])
    except Exception as exc:  # noqa: BLE001 - one problem's failure is a row, not the end of the sweep
        row.update(verdict="error", reason=f"{type(exc).__name__}: {exc}"[:400],
                   traceback=traceback.format_exc()[-800:])
    return row


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(rows: list[dict]) -> str:
    lines = ["| problem | A/A verdict | variants checked | variants (sizes, or why not) | held-out s (reference) |",
             "|---|---|---|---|---|"]
    for r in rows:
        held = r.get("heldout") or []
        checked = sum(1 for v in held if not v.get("skipped"))
        lines.append(f"| {r['problem']} | {r['verdict']} | {checked}/{len(held)} | {variants_text(held)} | "
                     f"{_seconds(r.get('heldout_reference_s'))} |")
    passed = sum(r["verdict"] == "pass" for r in rows)
    full = sum(1 for r in rows if r.get("heldout") and not any(v.get("skipped") for v in r["heldout"]))
    lines += ["", f"{len(rows)} problems: {passed} A/A pass; {full} ran every variant; "
                  f"{sum(1 for r in rows if any(v.get('skipped') for v in r.get('heldout') or []))} skipped at least "
                  "one (the reference could not run it: why above)"]
    costs = [r for r in rows if r.get("check_on_s") and r.get("check_off_s")]
    if costs:
        added = [r["check_on_s"] - r["check_off_s"] for r in costs]
        share = [(r["check_on_s"] - r["check_off_s"]) / r["check_off_s"] for r in costs]
        lines.append(f"cost, {len(costs)} problems evaluated as check runs them: added "
                     f"{sum(added) / len(added):+.2f} s a check on average ({sum(share) / len(share):+.1%} of an "
                     "evaluation)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--problems", default="1/all,2/all")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--shard", default="0/1")
    parser.add_argument("--measure", action="store_true", help="time the A/A too (slower)")
    parser.add_argument("--time-budget", type=float, default=1.0)
    parser.add_argument("--cost-every", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=540)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--merge", type=Path, default=None,
                        help="only merge the shards' JSONL files in --out into this folder (heldout_aa.jsonl, .md)")
    args = parser.parse_args()
    if args.merge is not None:
        rows = [json.loads(line) for f in sorted(args.out.glob("heldout_aa_*of*.jsonl"))
                for line in f.read_text().splitlines() if line.strip()]
        rows.sort(key=lambda r: [int(p) for p in r["problem"].split("_")[0].split("/")])
        args.merge.mkdir(parents=True, exist_ok=True)
        (args.merge / "heldout_aa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (args.merge / "heldout_aa.md").write_text(table(rows) + "\n")
        print("\n".join(table(rows).splitlines()[-3:]))
        return
    index, count = (int(x) for x in args.shard.split("/"))
    problems = expand(args.kernelbench, args.problems)[index::count]
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"heldout_aa_{index}of{count}"
    jsonl = args.out / f"{stem}.jsonl"
    started, rows = time.monotonic(), []
    for i, problem in enumerate(problems):
        if time.monotonic() - started > args.max_seconds:
            print(f"stopped after {len(rows)} of {len(problems)} problems (--max-seconds)", flush=True)
            break
        row = judge_one(problem, args.target, args.measure, args.time_budget,
                        bool(args.cost_every) and i % args.cost_every == 0)
        row["date"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        rows.append(row)
        with open(jsonl, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        line = f"{row['problem']}: {row['verdict']} {row.get('wall_s', '-')} s; "
        print((line + variants_text(row.get("heldout") or []))[:300], flush=True)
    text = table(rows)
    (args.out / f"{stem}.md").write_text(text + "\n")
    print(text.splitlines()[-1] if not any(r.get("check_on_s") for r in rows) else "\n".join(text.splitlines()[-2:]))


if __name__ == "__main__":
    main()
