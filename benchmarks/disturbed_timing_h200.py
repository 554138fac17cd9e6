"""The disturbance detector and the hang finder on a GPU (issue 40), for the H200. Untested on a GPU when written
(the CPU machine it was written on has none): the lead runs it.

1. A/A with the detector on: each KernelBench problem of --problems (KernelBench in .kb/) checked against itself
   (`kforge-bot check` with the reference's forward called through a subclass), --repeats times. No figure may
   change on a quiet GPU: the result is the fraction of evaluations called `inconclusive` (disturbed), with what
   disturbed them, each side's busy threads, the SM clock range and the throttled share (NVML, where pynvml
   imports; otherwise the GPU part of the conditions is absent and the script says so).
2. A hang: a Triton kernel that spins forever on the device (a volatile load of a value that never changes),
   launched in the candidate's first call. Target: `timeout` with "hung in a first call", judged within 60 s of
   the worker's start (the default no-progress limit is 30 s; a first call that builds is exempt only while a
   compiler runs or files are read or written).

    PYTHONPATH=$PWD bash -c '. benchmarks/device_sandbox.sh; python3 benchmarks/disturbed_timing_h200.py \
        --kernelbench .kb --problems 1/1,1/23,1/40,2/12,2/17 --repeats 4 --out "${OUT:-gpu-out}"'
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

AA = '''

class ModelNew(Model):
    """A/A: the reference itself, called through a subclass."""

    def forward(self, *args):
        return super().forward(*args)
'''

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
'''

SPIN = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _spin(flag_ptr):
    value = tl.load(flag_ptr, volatile=True)
    while value == 0:  # the flag is zero and nothing writes it: never returns
        value = tl.load(flag_ptr, volatile=True)


class ModelNew(nn.Module):
    def forward(self, x):
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        _spin[(1,)](flag)
        return torch.softmax(x, dim=1)
'''


def check(problem: Path, candidate: Path, *extra: str, timeout: float = 900) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "kforge_bot", "check", str(problem), "--candidate", str(candidate),
                               "--target", "cuda", "--allow-fallback", "--json", str(report), *extra],
                              capture_output=True, text=True, timeout=timeout)
        wall = time.monotonic() - started
        if not report.is_file():
            return {"verdict": "error", "wall_s": round(wall, 1), "reason": (proc.stderr or proc.stdout)[-600:]}
        data = json.loads(report.read_text())
    shown = (data.get("details") or {}).get("conditions") or {}
    gpu = []
    for entry in shown.get("per_shape") or []:
        for side in ("baseline", "candidate"):
            s = entry.get(side) or {}
            gpu.append({"side": side, "sm_clock_mhz": s.get("sm_clock_mhz"), "throttled_share": s.get("throttled_share"),
                        "preempted_share": s.get("preempted_share"), "busy_threads": s.get("busy_threads")})
    return {"verdict": data["verdict"], "reason": data["reason"][:400], "speedup": data.get("speedup"),
            "ci": data.get("speedup_ci"), "wall_s": round(wall, 1), "disturbed": shown.get("disturbed"),
            "threads": shown.get("threads"), "sides": gpu,
            "isolation": (data.get("details") or {}).get("isolation")}


def _problem_file(root: Path, spec: str) -> Path:
    level, number = spec.split("/")
    matches = sorted((root / "KernelBench" / f"level{level}").glob(f"{number}_*.py"))
    if not matches:
        raise SystemExit(f"no KernelBench problem {spec} under {root}")
    return matches[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench", type=Path, default=Path(".kb"))
    parser.add_argument("--problems", default="1/1,1/23,1/40,2/12,2/17")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--time-budget", default="2")
    parser.add_argument("--skip-hang", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("gpu-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        import pynvml  # noqa: F401, PLC0415
        nvml = "pynvml imports: clocks and throttle reasons are measured"
    except ImportError:
        nvml = "pynvml does not import: no clocks or throttle reasons in the conditions (host conditions only)"
    print(nvml, flush=True)
    results: dict[str, Any] = {"nvml": nvml, "aa": [], "hang": None}
    path = args.out / "disturbed_timing_h200.json"
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_hang:
            problem, spin = Path(tmp) / "softmax.py", Path(tmp) / "spin.py"
            problem.write_text(PROBLEM)
            spin.write_text(SPIN)
            hang = check(problem, spin, "--no-timing", "--timeout", "300", timeout=400)
            hang["target"] = "timeout with 'hung in a first call' within 60 s"
            hang["met"] = hang["verdict"] == "timeout" and "hung in a first call" in hang["reason"] and \
                hang["wall_s"] < 60
            results["hang"] = hang
            print(f"hang: {hang['verdict']} in {hang['wall_s']} s (met: {hang['met']}): {hang['reason'][:200]}",
                  flush=True)
            path.write_text(json.dumps(results, indent=1))
        for spec in args.problems.split(","):
            problem = _problem_file(args.kernelbench, spec)
            aa = Path(tmp) / f"aa_{problem.name}"
            aa.write_text(problem.read_text() + AA)
            for repeat in range(args.repeats):
                row = {"problem": spec, "name": problem.stem, "repeat": repeat,
                       **check(problem, aa, "--timing-budget", args.time_budget)}
                results["aa"].append(row)
                print(f"{spec} #{repeat}: {row['verdict']} {row.get('speedup')} CI {row.get('ci')} "
                      f"disturbed: {row.get('disturbed')} | {row.get('threads')} | {row.get('sides')}", flush=True)
                rows = results["aa"]
                results["aa_summary"] = {
                    "evaluations": len(rows),
                    "inconclusive": sum(1 for r in rows if r["verdict"] == "inconclusive"),
                    "fraction_disturbed": round(sum(1 for r in rows if r["verdict"] == "inconclusive") / len(rows), 3),
                    "ci_excludes_1": sum(1 for r in rows if r.get("ci") and not r["ci"][0] <= 1.0 <= r["ci"][1]),
                    "other": sum(1 for r in rows if r["verdict"] not in ("pass", "inconclusive"))}
                path.write_text(json.dumps(results, indent=1))
    print(json.dumps(results.get("aa_summary")), flush=True)


if __name__ == "__main__":
    main()
