"""The regression gate's performance criteria (issue 5).

GPU part (`--target cuda`, for the H200): a ~1 ms memory-bound kernel (benchmarks/harness_kernels/
rowsum.py, 4 GiB read) judged at the default policy's 2% threshold and 95% confidence by the gate's
own decision code (`kforge_bot.gate.compare`, confirmation run included), with the base version
loaded the way the gate loads it (its own implementation, rooted in its own checkout directory):
- A/A: base and head are the same kernel, N decisions; a `regression` is a false alarm (target 0);
- a 3% slowdown: the head reads more rows, calibrated once so that the measured median slowdown is
  about 3%; N decisions, each must be `regression` (target N of N);
- GPU seconds per kernel: the wall time of each decision (child processes, correctness, timing);
- when git is there, one whole `run_gate` on a git repository with that 3% change.
Decisions share one reference computation (fixed seeds): only the correctness oracle is reused;
every decision times base and head afresh.

CPU part (`--target cpu`): a git repository with 50 managed CPU kernels, one changed, gated with the
real CLI: the PR gate (changed kernels only), a cold `--all` run that fills the cache, the `--all`
run with a warm cache where one kernel changed (target: under 30 s), and a fully cached re-run.

    python benchmarks/gate_benchmark.py --target cuda --out benchmarks/results   # ~4-5 minutes
    python benchmarks/gate_benchmark.py --target cpu --out benchmarks/results

Results: <out>/gate_<target>.json and .md, with date and device, rewritten after every phase.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from kforge_bot.config.policy import GateRule, load_policy
from kforge_bot.evaluate.api import new_seeds
from kforge_bot.evaluate.references import ReferenceStore
from kforge_bot.gate.decision import regression_bound
from kforge_bot.gate.measure import compare, gate_settings
from kforge_bot.kernelspec import load_spec

BASE_EXTRA = 0.1  # rowsum.py's extra fraction of rows read by the baseline


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


class Results:
    """Accumulates phases and rewrites the JSON and Markdown files after each one."""

    def __init__(self, out: Path, target: str) -> None:
        self.out, self.target = out, target
        self.data: dict[str, Any] = {"date": now(), "target": target, "host": platform.node(),
                                     "python": platform.python_version(), "phases": {}}
        out.mkdir(parents=True, exist_ok=True)

    def add(self, name: str, value: Any) -> None:
        self.data["phases"][name] = value
        self.data["updated"] = now()
        (self.out / f"gate_{self.target}.json").write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        (self.out / f"gate_{self.target}.md").write_text(render_md(self.data))


def render_md(data: dict[str, Any]) -> str:
    lines = [f"# Gate benchmark ({data['target']})", "",
             f"Measured {data['date']} on {data.get('device', '?')} (host {data['host']}, Python {data['python']}, "
             f"torch {data.get('torch', '?')}).", ""]
    phases = data["phases"]
    if "aa" in phases or "slowdown" in phases:
        lines += ["| decisions | threshold | criterion | met | median measured change | median GPU s per decision | "
                  "max | confirmations |", "|---|---|---|---|---|---|---|---|"]
        for key, label, criterion in (("aa", "A/A (same kernel)", "no regression"),
                                      ("slowdown", "3% slower head", "regression")):
            p = phases.get(key)
            if not p:
                continue
            lines.append(f"| {label}, {p['n']} | {p['threshold']:.0%} | {criterion} | {p['met']}/{p['n']} | "
                         f"{p['median_change']:+.2%} | {p['median_wall_s']:.1f} | {p['max_wall_s']:.1f} | "
                         f"{p['confirmations']} |")
        lines.append("")
    if "calibration" in phases:
        c = phases["calibration"]
        probes = c.get("probes") or [{"extra_rows": c["extra_work"], "measured_change": c["measured_change"]}]
        tried = "; ".join(f"{p['extra_rows']:.2%} more rows read measured {p['measured_change']:+.2%}"
                          for p in probes if p.get("measured_change") is not None)
        lines.append(f"Calibration: {tried or 'no usable probe'}; the slowdown phase reads "
                     f"{c['chosen_extra_work']:.2%} more rows.")
        lines.append("")
    if "full_gate" in phases:
        g = phases["full_gate"]
        lines.append(f"Whole `run_gate` on a git repository with that change: verdict **{g.get('verdict')}**, "
                     f"{g.get('wall_s', 0):.1f} s wall" + (f" ({g['note']})" if g.get("note") else "") + ".")
        lines.append("")
    if "cpu" in phases:
        c = phases["cpu"]
        lines += [f"Repository with {c['kernels']} managed CPU kernels, {c['changed']} changed; policy: "
                  f"{c['policy']}; machine load average before: {c.get('load_before')}.", "",
                  "| run | kernels measured | cache hits | verdicts of the measured (confirmation runs) | wall s | target |",
                  "|---|---|---|---|---|---|"]
        for run in c["runs"]:
            counts = ", ".join(f"{n} {v}" for v, n in run.get("verdict_counts", {}).items()) or "-"
            lines.append(f"| {run['name']} | {run['measured']} | {run['cached']} | {counts} "
                         f"({run.get('confirmation_runs', 0)}) | {run['wall_s']:.1f} | {run.get('target', '')} |")
        lines.append("")
    for note in data.get("notes", []):
        lines.append(f"Note: {note}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- GPU part


def rowsum_source(extra: float) -> str:
    source = (HERE / "harness_kernels" / "rowsum.py").read_text()
    replaced = source.replace(f"EXTRA = {BASE_EXTRA!r}", f"EXTRA = {extra!r}")
    assert f"EXTRA = {extra!r}" in replaced
    return replaced


SPIN_1MS_CYCLES = 2_000_000  # torch.cuda._sleep cycles: about 1.0 ms at the H200's 1.98 GHz


def spin_source(extra: float) -> str:
    """spin.py dialled to about 1 ms, with `extra` more spinning: time is linear in it (harness_resolution
    measured 1%, 2%, 5%, 10% more spin as 0.9913x, 0.9835x, 0.9602x, 0.9243x), so 3% more is a 3.0% slowdown."""
    source = (HERE / "harness_kernels" / "spin.py").read_text()
    replaced = source.replace("CYCLES = 40000", f"CYCLES = {round(SPIN_1MS_CYCLES * (1 + extra))}")
    assert replaced != source
    return replaced


def checkout(folder: Path, extra: float, kernel: str) -> Path:
    """A directory laid out like a checkout of a repository holding just the benchmark kernel."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    manifest = yaml.safe_load((HERE / "harness_kernels" / "kforge.yaml").read_text())
    manifest["kernels"] = {kernel: manifest["kernels"][kernel]}
    (folder / "kforge.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    if kernel.startswith("spin"):
        (folder / "spin.py").write_text(spin_source(extra))
    else:
        (folder / "rowsum.py").write_text(rowsum_source(extra))
    return folder


def decisions(label: str, n: int, head_extra: float, target: str, work: Path, rule: GateRule, store: ReferenceStore,
              seeds: list[int], deadline: float, kernel: str = "rowsum_1ms",
              results: Results | None = None, base_extra: float = BASE_EXTRA) -> dict[str, Any]:
    base_dir = checkout(work / f"{label}-base", base_extra, kernel)
    head_dir = checkout(work / f"{label}-head", head_extra, kernel)
    base_spec = load_spec(base_dir / "kforge.yaml", kernel)
    head_spec = load_spec(head_dir / "kforge.yaml", kernel)
    # As the gate does it: the base from its own checkout (the worker gives each implementation its own
    # checkout's local modules); the kernel is its own reference, so the base version is the oracle.
    base = base_spec.baseline
    settings = gate_settings(load_policy(None), rule)
    rows = []
    for i in range(n):
        if time.monotonic() > deadline:
            break
        m = compare(head_spec, head_spec.baseline, base, target, settings, rule.threshold, oracle=base,
                    references=store, seeds=seeds)
        r = m.result
        row = {"run": i, "verdict": m.verdict, "reason": m.reason, "wall_s": round(m.wall_s, 2), "runs": m.runs,
               "confirmed": m.first is not None, "speedup": r.speedup if r else None,
               "speedup_ci": list(r.speedup_ci) if r and r.speedup_ci else None,
               "base_ms": r.baseline.median_ms if r and r.baseline else None,
               "head_ms": r.candidate.median_ms if r and r.candidate else None,
               "pairs": [t.get("pairs") for t in (r.details.get("timing", []) if r else [])],
               "device": r.device_name if r else None}
        print(json.dumps({"phase": label, **row}), flush=True)
        rows.append(row)
        if results is not None:  # after every decision: a run cut short by a timeout keeps what it measured
            results.add(label, summarize(label, rows, n, rule, head_extra))
    return summarize(label, rows, n, rule, head_extra)


def summarize(label: str, rows: list[dict[str, Any]], n: int, rule: GateRule, head_extra: float) -> dict[str, Any]:
    wanted = "regression" if label == "slowdown" else None
    met = sum(1 for r in rows if (r["verdict"] == wanted if wanted else r["verdict"] != "regression"))
    changes = [1 / r["speedup"] - 1 for r in rows if r["speedup"]]
    walls = [r["wall_s"] for r in rows]
    return {"n": len(rows), "requested": n, "threshold": rule.threshold, "confidence": rule.confidence,
            "bound": regression_bound(rule.threshold), "head_extra_work": round((1 + head_extra) / (1 + BASE_EXTRA) - 1, 5),
            "met": met, "false_alarms" if not wanted else "missed": len(rows) - met,
            "verdicts": {v: sum(1 for r in rows if r["verdict"] == v) for v in {r["verdict"] for r in rows}},
            "median_change": statistics.median(changes) if changes else float("nan"),
            "median_wall_s": statistics.median(walls) if walls else float("nan"),
            "mean_wall_s": statistics.mean(walls) if walls else float("nan"),
            "max_wall_s": max(walls) if walls else float("nan"),
            "confirmations": sum(1 for r in rows if r["confirmed"]), "rows": rows}


def full_gate(target: str, extra: float, work: Path, kernel: str) -> dict[str, Any]:
    """One whole gate run on a git repository whose head makes the kernel read `extra` more rows."""
    if shutil.which("git") is None:
        return {"note": "skipped: git is not installed here"}
    from kforge_bot.gate.run import run_gate

    repo = checkout(work / "repo", BASE_EXTRA, kernel)
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@example.com"}

    def sh(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    sh("init", "-q", "-b", "main")
    sh("add", "-A")
    sh("commit", "-q", "-m", "base")
    (repo / "rowsum.py").write_text(rowsum_source(extra))
    sh("commit", "-q", "-am", "3% slower")
    policy = load_policy(None)
    started = time.monotonic()
    report = run_gate(repo, "HEAD~1", policy=policy, target=target, use_cache=False, log=print)
    wall = time.monotonic() - started
    k = next((k for k in report.kernels if k.id == kernel), None)
    return {"verdict": k.verdict if k else None, "reason": k.reason if k else None, "wall_s": wall,
            "gate_wall_s_of_this_kernel": k.wall_s if k else None,
            "kernels": {x.id: x.verdict for x in report.kernels}, "exit_code": report.exit_code}


def gpu_part(args: argparse.Namespace, results: Results) -> None:
    import torch

    results.data["torch"] = torch.__version__
    device_kind, kernel = ("cpu", "rowsum_10us") if args.smoke else ("cuda", "rowsum_1ms")
    if args.slowdown_kernel == "spin" and not args.smoke:
        return spin_gpu_part(args, results)
    if args.smoke:
        results.data.setdefault("notes", []).append("SMOKE RUN: the GPU part's code on the CPU with the 10 us "
                                                    "kernel; these figures are not the benchmark")
    elif not torch.cuda.is_available():
        results.data.setdefault("notes", []).append("GPU part skipped: no CUDA device on this machine")
        results.add("skipped", True)
        return
    results.data["device"] = torch.cuda.get_device_name(0) if device_kind == "cuda" else "cpu (smoke)"
    rule = GateRule(threshold=0.02, confidence=0.95)
    seeds = new_seeds(3)
    with gpu_part_limits(args, results) as (deadline, store, work):
        # Calibration: how much more reading makes the head 3% slower in time. Time is not linear in the rows
        # re-read (on the H200, 3.00% more rows cost +4.4% and 2.04% cost +1.7%), so probe up to four times,
        # interpolating between the nearest probes on either side of 3%, until one lands within 2.6-3.4%.
        probes: list[tuple[float, float]] = []
        probe, chosen = 0.03, 0.03
        for i in range(4):
            m = decisions(f"calibration{i}", 1, round((1 + BASE_EXTRA) * (1 + probe) - 1, 6), device_kind, work,
                          rule, store, seeds, deadline, kernel)
            measured = m["median_change"]
            if not (isinstance(measured, float) and math.isfinite(measured) and measured > 0.003):
                break
            probes.append((probe, measured))
            chosen = probe
            if 0.026 <= measured <= 0.034:
                break
            below = max((p for p in probes if p[1] < 0.03), key=lambda p: p[1], default=None)
            above = min((p for p in probes if p[1] > 0.03), key=lambda p: p[1], default=None)
            if below and above:
                probe = below[0] + (above[0] - below[0]) * (0.03 - below[1]) / (above[1] - below[1])
            else:
                probe = probe * 0.03 / measured
            probe = min(max(probe, 0.005), 0.10)
        if probes:
            chosen = min(probes, key=lambda p: abs(p[1] - 0.03))[0]
        results.add("calibration", {"extra_work": probes[0][0] if probes else 0.03,
                                    "measured_change": probes[0][1] if probes else None, "chosen_extra_work": chosen,
                                    "probes": [{"extra_rows": p, "measured_change": c} for p, c in probes]})
        aa = {"rows": []}
        if not args.skip_aa:
            aa = decisions("aa", args.decisions, BASE_EXTRA, device_kind, work, rule, store, seeds, deadline, kernel,
                           results)
            results.add("aa", aa)
        slow = decisions("slowdown", args.decisions, round((1 + BASE_EXTRA) * (1 + chosen) - 1, 6), device_kind,
                         work, rule, store, seeds, deadline, kernel, results)
        results.add("slowdown", slow)
        if args.full_gate and time.monotonic() < deadline:
            results.add("full_gate", full_gate(device_kind, round((1 + BASE_EXTRA) * (1 + chosen) - 1, 6), work, kernel))
        per = [r["wall_s"] for p in (aa, slow) for r in p["rows"]]
        results.add("gpu_seconds_per_kernel", {
            "median": statistics.median(per) if per else None, "mean": statistics.mean(per) if per else None,
            "max": max(per) if per else None,
            "note": "wall time of one gate decision on one kernel: base and head in child processes, correctness "
                    "checks, interleaved timing, a confirmation run when the first interval straddles the bound; "
                    "the reference computation (once per kernel in a gate run) is not included"})


@contextmanager
def gpu_part_limits(args: argparse.Namespace, results: Results) -> Iterator[tuple[float, ReferenceStore, Path]]:
    """A GPU part's deadline (--max-seconds from now), reference store and work folder; after the part, a note where
    the limit cut it short and its wall time, and the store and the folder removed however it ended."""
    started = time.monotonic()
    deadline = started + args.max_seconds
    store = ReferenceStore()
    work = Path(tempfile.mkdtemp(prefix="kforge-gate-bench-"))
    try:
        yield deadline, store, work
        if time.monotonic() > deadline:
            results.data.setdefault("notes", []).append(f"stopped at the {args.max_seconds:g} s limit: fewer "
                                                        "decisions than requested")
        results.add("wall_s", time.monotonic() - started)
    finally:
        store.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def spin_gpu_part(args: argparse.Namespace, results: Results) -> None:
    """The gate's exact 3% point: a ~1 ms spinning kernel whose head spins exactly 3% longer (no calibration:
    time is linear in the spin), and its A/A, at the default policy's 2% threshold and 95% confidence."""
    import torch

    results.data["torch"] = torch.__version__
    if not torch.cuda.is_available():
        results.data.setdefault("notes", []).append("GPU part skipped: no CUDA device on this machine")
        return
    results.data["device"] = torch.cuda.get_device_name(0)
    results.data.setdefault("notes", []).append(f"kernel: spin_1ms ({SPIN_1MS_CYCLES} cycles of torch.cuda._sleep, "
                                                "then a 64 KiB sum); head: 3.0% more spin")
    rule = GateRule(threshold=0.02, confidence=0.95)
    seeds = new_seeds(3)
    with gpu_part_limits(args, results) as (deadline, store, work):
        phases = [("slowdown", 0.03)] if args.skip_aa else [("aa", 0.0), ("slowdown", 0.03)]
        for label, extra in phases:
            # Alternate the two phases' decisions would mix them; each phase gets half the remaining time.
            phase_deadline = time.monotonic() + (deadline - time.monotonic()) / (2 if label == "aa" else 1)
            results.add(label, decisions(label, args.decisions, extra, "cuda", work, rule, store, seeds, phase_deadline,
                                         "spin_1ms", results, base_extra=0.0))


# ---------------------------------------------------------------------------------------- CPU part


CPU_KERNEL = '''\
import torch


def kernel(x, y):
    return torch.relu(x * {a} + y)


def reference(x, y):
    return torch.relu(x * {a} + y)


def make_inputs(n):
    return torch.randn(n, n), torch.randn(n, n)
'''
CPU_KERNEL_CHANGED = '''\
import torch


def kernel(x, y):
    return (x * {a} + y).clamp_min(0.0)  # same result, written differently


def reference(x, y):
    return torch.relu(x * {a} + y)


def make_inputs(n):
    return torch.randn(n, n), torch.randn(n, n)
'''


def cpu_part(args: argparse.Namespace, results: Results) -> None:
    from kforge_bot.targets.fingerprint import probe_fingerprint

    fp = probe_fingerprint("cpu")
    results.data["device"], results.data["torch"] = fp.device_name, fp.torch_version
    n_kernels, changed = args.kernels, 7
    work = Path(tempfile.mkdtemp(prefix="kforge-gate-cpu-"))
    repo = work / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@example.com",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    env = {k: v for k, v in env.items() if not k.startswith("GITHUB_")}

    def sh(*cmd: str) -> str:
        return subprocess.run(cmd, cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()

    manifest = ["version: 1", "kernels:"]
    for i in range(n_kernels):
        (repo / "kernels").mkdir(exist_ok=True)
        (repo / "kernels" / f"k{i:02d}.py").write_text(CPU_KERNEL.format(a=1.0 + i / 100))
        manifest += [f"  k{i:02d}:", f"    file: kernels/k{i:02d}.py", "    entry: kernel",
                     f"    reference: kernels/k{i:02d}.py:reference", f"    inputs: kernels/k{i:02d}.py:make_inputs",
                     "    shapes: [{n: 64}]", "    targets: [cpu]"]
    (repo / "kforge.yaml").write_text("\n".join(manifest) + "\n")
    policy_text = f"version: 1\nevaluation: {{timing_budget_s: {args.cpu_budget:g}}}\n"
    (repo / "policy.yml").write_text(policy_text)
    (repo / ".gitignore").write_text(".kforge-cache/\n")
    sh("git", "init", "-q", "-b", "main")
    sh("git", "add", "-A")
    sh("git", "commit", "-q", "-m", "50 kernels")
    (repo / "kernels" / f"k{changed:02d}.py").write_text(CPU_KERNEL_CHANGED.format(a=1.0 + changed / 100))
    sh("git", "commit", "-q", "-am", "one kernel changed")
    cache = work / "cache"
    runs: list[dict[str, Any]] = []
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

    def gate(name: str, *extra: str, target_s: float | None = None, cache_dir: Path = cache) -> None:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "kforge_bot.cli", "gate", "--policy", "policy.yml", "--json", "-",
                               "--cache-dir", str(cache_dir), *extra], cwd=repo, env=env, capture_output=True,
                              text=True, check=False, timeout=3600)
        wall = time.monotonic() - started
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            report = {"kernels": [], "error": proc.stderr[-2000:]}
        kernels = report.get("kernels", [])
        row = {"name": name, "args": list(extra), "exit_code": proc.returncode, "wall_s": wall,
               "measured": sum(1 for k in kernels if k.get("measured")),
               "cached": sum(1 for k in kernels if k.get("cached")),
               "measured_kernels": {k["id"]: {"verdict": k["verdict"], "reason": k["reason"], "wall_s": k["wall_s"],
                                              "confirmed": k["confirmed"]} for k in kernels if k.get("measured")},
               "measured_wall_s": sum(k.get("wall_s", 0) for k in kernels), "unchanged": len(report.get("unchanged", [])),
               "verdict_counts": {v: sum(1 for k in kernels if k.get("measured") and k["verdict"] == v)
                                  for v in sorted({k["verdict"] for k in kernels if k.get("measured")})},
               "confirmation_runs": sum(1 for k in kernels if k.get("measured") and k.get("confirmed"))}
        if target_s is not None:
            row["target"] = f"< {target_s:g} s: {'met' if wall < target_s else 'NOT met'}"
        if report.get("error"):
            row["error"] = report["error"]
        runs.append(row)
        print(json.dumps(row), flush=True)
        results.add("cpu", {"kernels": n_kernels, "changed": 1, "policy": policy_text.strip().replace("\n", "; "),
                            "load_before": load_before, "runs": runs})

    try:
        gate("PR gate: the changed kernel measured, the 49 unchanged ones not (empty cache)", "--base", "HEAD~1",
             target_s=30.0)
        gate("PR gate re-run (its result cached)", "--base", "HEAD~1")
        if not args.skip_all:
            nightly = work / "cache-all"  # its own cache: the changed kernel's result must not be in it yet
            gate("--all at the base revision, empty cache (measures all, fills the cache)", "--all", "--base",
                 "HEAD~1", "--head", "HEAD~1", cache_dir=nightly)
            gate("--all, warm cache, 1 kernel changed", "--all", "--base", "HEAD~1", target_s=30.0, cache_dir=nightly)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--decisions", type=int, default=20, help="A/A and 3%% decisions each (GPU part)")
    parser.add_argument("--max-seconds", type=float, default=280.0, help="GPU part: stop starting decisions after this")
    parser.add_argument("--no-full-gate", dest="full_gate", action="store_false",
                        help="GPU part: skip the whole-gate run on a git repository")
    parser.add_argument("--slowdown-kernel", choices=["spin", "rowsum"], default="rowsum",
                        help="GPU part: spin (a ~1 ms spin, head exactly 3%% longer) or rowsum (memory-bound, "
                             "calibrated)")
    parser.add_argument("--skip-aa", action="store_true", help="GPU part: only calibration and the slowdown phase")
    parser.add_argument("--kernels", type=int, default=50, help="CPU part: managed kernels in the repository")
    parser.add_argument("--cpu-budget", type=float, default=2.0, help="CPU part: policy evaluation.timing_budget_s")
    parser.add_argument("--skip-all", action="store_true", help="CPU part: skip the two --all runs (the cold one "
                                                                "measures every kernel)")
    parser.add_argument("--smoke", action="store_true", help="run the GPU part's code on the CPU (10 us kernel) to "
                                                               "check the script; not a result")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    results = Results(args.out, args.target)
    if args.target == "cpu":
        cpu_part(args, results)
    else:
        gpu_part(args, results)
    print(render_md(results.data))


if __name__ == "__main__":
    main()
