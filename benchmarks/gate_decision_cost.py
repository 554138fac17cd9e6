"""What one gate decision costs (issue 38: the cost of giving base and head a process each, before and after).

A decision is the gate's own code, `kforge_bot.gate.measure.compare` (correctness, interleaved timing and the
confirmation run where the first interval straddles), on one manifest kernel whose head is its base written
differently (the same result, so the verdict is `pass` or an unresolved straddle: an A/A comparison). The base is
loaded as the gate loads it, from its own checkout folder. Each decision draws fresh seeds, so each computes its
reference too, as a gate run does.

    python benchmarks/gate_decision_cost.py --target cpu --decisions 8 --label "before: one candidate worker"
    python benchmarks/gate_decision_cost.py --target cuda --decisions 8 --label ... --out $OUT    # on the H200
    python benchmarks/gate_decision_cost.py --one-worker ...   # this tree with base and head in one worker (before)
    python benchmarks/gate_decision_cost.py --no-spares ...    # this tree without spare workers between runs
    python benchmarks/gate_decision_cost.py --no-ship ...      # the head's worker imports the base's reference and
                                                               # inputs again (before shipped inputs, issue 38)

Every run appends its labelled summary to <out>/gate_decision_cost_<target>.json and rewrites the .md beside it,
so figures before and after a change sit side by side; compare only rows from one machine under like load (the
load average before and after each run is recorded; on a shared machine say so).

Figures: seconds per decision (median, mean, max; how many needed a confirmation run); the largest worker's peak
resident memory (getrusage of this process's waited-for descendants: the candidate worker, which held base and
head before the split, and the larger of the two side workers since); on cuda, the device's peak used memory above
what it used before the run (nvidia-smi, every 0.1 s).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from kforge_bot.config.policy import load_policy  # noqa: E402
from kforge_bot.evaluate.api import evaluate  # noqa: E402
from kforge_bot.gate.base_spec import judged_spec  # noqa: E402
from kforge_bot.gate.measure import compare, gate_settings  # noqa: E402
from kforge_bot.kernelspec import kernel_implementation, load_spec  # noqa: E402

REFERENCE = """\
import torch


def reference(x, y):
    return torch.relu(x * 2.0 + y)


def make_inputs(n):
    return torch.randn(n, n), torch.randn(n, n)
"""
BASE_KERNEL = "import torch\n\n\ndef kernel(x, y):\n    return torch.relu(x * 2.0 + y)\n"
HEAD_KERNEL = "import torch\n\n\ndef kernel(x, y):\n    return (x * 2.0 + y).clamp_min(0.0)  # the same, differently\n"
SIZES = {"cpu": 512, "cuda": 4096}


def checkout(folder: Path, kernel: str, target: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ref.py").write_text(REFERENCE)
    (folder / "k.py").write_text(kernel)
    (folder / "kforge.yaml").write_text(
        "version: 1\nkernels:\n  k:\n    file: k.py\n    entry: kernel\n    reference: ref.py:reference\n"
        f"    inputs: ref.py:make_inputs\n    shapes: [{{n: {SIZES[target]}}}]\n    targets: [{target}]\n")
    return folder


class DeviceMemory:
    """The device's used memory, sampled by nvidia-smi in a thread: its peak above the first sample."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _used_mib(self) -> float | None:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                                 capture_output=True, text=True, timeout=5).stdout.strip()
            return float(out.splitlines()[0])
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
            return None

    def _run(self) -> None:
        while not self._stop.is_set():
            used = self._used_mib()
            if used is not None:
                self.samples.append(used)
            self._stop.wait(0.1)

    def __enter__(self) -> DeviceMemory:
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def peak_above_idle_mib(self) -> float | None:
        return max(self.samples) - self.samples[0] if len(self.samples) > 1 else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kforge-decision-cost-"))
    try:
        base = load_spec(checkout(work / "base", BASE_KERNEL, args.target) / "kforge.yaml", "k")
        head = load_spec(checkout(work / "head", HEAD_KERNEL, args.target) / "kforge.yaml", "k")
        policy = load_policy(None)
        rule = policy.rule_for("k", "k.py", args.target)
        settings = gate_settings(policy, rule, args.timing_budget_s)
        spec = judged_spec(head, base)
        # --one-worker: the layout before the split, from this tree, for a before/after pair in one sitting;
        # --no-spares: the split with every worker started by its own evaluation (before the base's spare; on a GPU
        # target, where compare keeps spares): any evaluator of the caller's keeps compare from starting spares.
        evaluator = functools.partial(evaluate, one_worker=True) if getattr(args, "one_worker", False) else \
            functools.partial(evaluate) if getattr(args, "no_spares", False) else None
        rows = []
        load_before = os.getloadavg()
        with DeviceMemory() as device_memory:
            for i in range(args.decisions):
                m = compare(spec, kernel_implementation(head), kernel_implementation(base), args.target, settings,
                            rule.threshold, evaluator=evaluator)
                rows.append({"decision": i, "verdict": m.verdict, "wall_s": round(m.wall_s, 3), "runs": m.runs,
                             # how the recorded inputs reached the head's worker (shipped only): device memory or files
                             "shipped_inputs": (m.result.details.get("shipped_inputs") if m.result else None),
                             # the hidden-work check's figures, each shape set: busy before and after, per side
                             "busy": _busy(m.result),
                             # what a decision other than pass says (an A/A must pass)
                             **({"reason": m.reason[:2000]} if m.verdict != "pass" else {})})
                print(json.dumps(rows[-1]), flush=True)
        walls = [r["wall_s"] for r in rows]
        return {
            "label": args.label, "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": _commit(), "machine": f"{platform.node()} ({platform.processor() or platform.machine()}, "
                                            f"{os.cpu_count()} cores)",
            "device": _device(args.target), "python": platform.python_version(), "target": args.target,
            "size": SIZES[args.target], "threshold": rule.threshold, "timing_budget_s": settings.timing_budget_s,
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
            "conditions": args.conditions, "decisions": len(rows),
            "verdicts": {v: sum(1 for r in rows if r["verdict"] == v) for v in sorted({r["verdict"] for r in rows})},
            "confirmed": sum(1 for r in rows if r["runs"] > 1),
            "median_s": round(statistics.median(walls), 2), "mean_s": round(statistics.mean(walls), 2),
            "max_s": round(max(walls), 2),
            "worker_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
            "device_peak_mib_above_idle": device_memory.peak_above_idle_mib(), "rows": rows,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "-"
    except OSError:
        return "-"


def _device(target: str) -> str:
    if target == "cuda":
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no cuda device"
    return platform.processor() or platform.machine()


def render_md(runs: list[dict[str, Any]], target: str) -> str:
    lines = [f"# Seconds and memory per gate decision ({target})", "",
             "`benchmarks/gate_decision_cost.py`: the gate's `compare` on one kernel whose head is its base written "
             "differently (A/A), fresh seeds per decision. Compare rows of one machine under like load only.", "",
             "| label | date | commit | machine / device | load before -> after | conditions | decisions | verdicts "
             "(confirmed) | median s | mean s | max s | worker peak RSS MiB | device peak MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        verdicts = ", ".join(f"{n} {v}" for v, n in r["verdicts"].items())
        lines.append(f"| {r['label']} | {r['date']} | {r['commit']} | {r['machine']} / {r['device']} | "
                     f"{r['load_before'][0]} -> {r['load_after'][0]} | {r['conditions']} | {r['decisions']} | "
                     f"{verdicts} ({r['confirmed']}) | {r['median_s']} | {r['mean_s']} | {r['max_s']} | "
                     f"{r['worker_peak_rss_mib']} | {r['device_peak_mib_above_idle'] or '-'} |")
    return "\n".join(lines) + "\n"


def _busy(result: Any) -> list[dict[str, Any]]:
    """The hidden-work check's figures of a decision's last run (ms, upper quartiles; host_tail_ms: the host's own
    share of a sample's busy-after, measured right after each sample and taken off it; reported in split layouts)."""
    timing = (result.details.get("timing") if result is not None else None) or []
    return [{k: t.get(k) for k in ("busy_before_ms", "busy_after_ms", "host_tail_ms")} for t in timing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--decisions", type=int, default=8)
    parser.add_argument("--timing-budget-s", type=float, default=None, help="default: the default policy's")
    parser.add_argument("--label", required=True, help="what this run measures (e.g. the design and commit)")
    parser.add_argument("--conditions", default="", help="the machine's load, in words (shared? busy loops?)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--one-worker", action="store_true",
                        help="base and head in one worker, as before the split (the same tree's 'before' row)")
    parser.add_argument("--no-spares", action="store_true",
                        help="no spare workers between a decision's runs (the gate before they had them)")
    parser.add_argument("--no-ship", action="store_true",
                        help="the head's worker imports the base's reference and inputs itself, as before shipped "
                             "inputs (Plan.ship_inputs; no command or policy turns them off)")
    args = parser.parse_args()
    if args.no_ship:
        from kforge_bot.evaluate import api

        api.ships_inputs = lambda spec, candidate: False  # this tree's layout before inputs were shipped
    summary = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"gate_decision_cost_{args.target}.json"
    runs = json.loads(path.read_text()) if path.exists() else []
    runs.append(summary)
    path.write_text(json.dumps(runs, indent=1) + "\n")
    md = path.with_suffix(".md")
    notes = md.read_text().partition("\n## Reading it")[1:] if md.exists() else ("", "")
    md.write_text(render_md(runs, args.target) + "".join(notes))  # a reader's notes below the table are kept
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))


if __name__ == "__main__":
    main()
