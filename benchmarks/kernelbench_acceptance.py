"""The acceptance suite: KernelBench problems through `kforge-bot check --target cuda`, beside KernelBench's
own `eval_kernel_against_ref` on the same candidate, on the same GPU, in the same run.

    python benchmarks/kernelbench_acceptance.py --kernelbench DIR --problems 1/40,2/12 --out DIR

DIR is a KernelBench checkout (fetched, never vendored: its `KernelBench/level*/` problems and
`src/kernelbench/`). Per problem, in this order:
- A/A: `ModelNew` is the reference itself (a subclass calling the reference's forward): the true speedup is
  exactly 1.0, so the interval must contain 1.0;
- `inline/N` instead of a KernelBench problem: y = 2x + 1 over 2^N fp32 values, and as the candidate a
  load_inline CUDA C++ kernel launched without a stream argument (tests/data/gpu/cuda_inline.py), the case
  where a captured graph replays nothing; N = 22 is about 10 us, N = 29 over 1 ms;
- torch.compile: `ModelNew` wraps the reference's forward in `torch.compile`; kforge-bot's speedup and
  interval, then KernelBench's (its cuda_event timing, 100 trials, 5 correctness trials) on the same file.
A sweep for verdicts: `--problems 1/all --aa-only all --skip-done results/kernelbench_l1_sweep_h200.jsonl ...`
runs A/A alone on every level-1 problem not yet judged.
Every figure and the wall time of each call go to `kernelbench_acceptance.jsonl` and the table printed last.
KernelBench's package imports LLM clients it does not use for evaluation; where they are missing, empty
stand-ins (`--shims DIR`, made here) let `kernelbench.eval` import.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

AA = '''

class ModelNew(Model):
    """A/A: the reference itself, called through a subclass."""

    def forward(self, *args):
        return super().forward(*args)
'''

COMPILED = '''

class ModelNew(Model):
    """The reference's forward, compiled by torch.compile (inductor, default mode)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._compiled = torch.compile(super().forward)

    def forward(self, *args):
        return self._compiled(*args)
'''

KB_EVAL = r'''
import json, sys, time, torch
sys.path.insert(0, sys.argv[1])
from kernelbench.eval import eval_kernel_against_ref
ref, cand = open(sys.argv[2]).read(), open(sys.argv[3]).read()
started = time.monotonic()
r = eval_kernel_against_ref(ref, cand, seed_num=42, num_correct_trials=5, num_perf_trials=100,
                            measure_performance=True, timing_method="cuda_event", backend="cuda",
                            build_dir=sys.argv[4], device=torch.device("cuda:0"))
out = {"compiled": r.compiled, "correct": r.correctness, "runtime_ms": r.runtime, "ref_runtime_ms": r.ref_runtime,
       "eval_s": time.monotonic() - started}
out["speedup"] = (r.ref_runtime / r.runtime) if r.runtime and r.ref_runtime and r.runtime > 0 else None
print("KB_RESULT " + json.dumps(out))
'''

SHIMS = {
    "dotenv.py": "def load_dotenv(*args, **kwargs):\n    return False\n",
    "litellm.py": "def completion(*args, **kwargs):\n    raise RuntimeError('litellm stand-in: not for evaluation')\n",
    "openai.py": "class OpenAI:\n    def __init__(self, *args, **kwargs):\n        raise RuntimeError('openai stand-in')\n",
}


GPU_DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "gpu"


def _problem_file(root: Path, spec: str, tmp: Path) -> Path:
    level, number = spec.split("/")
    if level == "inline":  # y = 2x + 1 over 1 << number fp32 values; the candidate: CUDA C++, no stream argument
        problem = tmp / f"inline_{number}_affine.py"
        problem.write_text((GPU_DATA / "problem.py").read_text().replace("1 << 22", f"1 << {int(number)}"))
        return problem
    matches = sorted((root / "KernelBench" / f"level{level}").glob(f"{number}_*.py"))
    if not matches:
        raise SystemExit(f"no KernelBench problem {spec} under {root}")
    return matches[0]


def _kforge(problem: Path, candidate: Path, budget: float, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "kforge_bot", "check", str(problem), "--candidate", str(candidate),
                               "--target", "cuda", "--allow-fallback", "--time-budget", str(budget),
                               "--json", str(report)], capture_output=True, text=True, timeout=timeout)
        wall = time.monotonic() - started
        if not report.is_file():
            return {"verdict": "error", "wall_s": wall, "reason": (proc.stderr or proc.stdout)[-600:]}
        data = json.loads(report.read_text())
    timing = (data.get("details") or {}).get("timing") or [{}]
    return {"verdict": data["verdict"], "reason": data["reason"][:300], "speedup": data.get("speedup"),
            "ci": data.get("speedup_ci"), "wall_s": round(wall, 1), "mode": timing[0].get("mode"),
            "mode_note": timing[0].get("mode_note", ""), "pairs": timing[0].get("pairs"),
            "per_call_ms": timing[0].get("per_call_ms"),
            "baseline_ms": (data.get("baseline") or {}).get("median_ms"),
            "candidate_ms": (data.get("candidate") or {}).get("median_ms"),
            "floor_ms": timing[0].get("hardware_floor_ms"), "large_gain": (data.get("details") or {}).get("large_gain"),
            "isolation": (data.get("details") or {}).get("isolation"),
            "phases": (data.get("details") or {}).get("phases"),
            "memory_fit": (data.get("details") or {}).get("memory_fit"),
            "shared_with_baseline": len((data.get("details") or {}).get("shared_with_baseline") or [])}


def _kernelbench(kb_root: Path, shims: Path, problem: Path, candidate: Path, timeout: float) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(shims), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory() as build:
        started = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-c", KB_EVAL, str(kb_root / "src"), str(problem), str(candidate), build],
                                  capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        wall = time.monotonic() - started
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("KB_RESULT ")), None)
    if line is None:
        return {"error": (proc.stderr or proc.stdout)[-600:], "wall_s": round(wall, 1)}
    return {**json.loads(line[len("KB_RESULT "):]), "wall_s": round(wall, 1)}


def _expand(root: Path, problems: str, done: set[str]) -> list[str]:
    """`1/all` is every problem of level 1, in number order; problems already judged (`done`) are left out."""
    specs = []
    for spec in problems.split(","):
        level, _, number = spec.partition("/")
        if number == "all":
            files = (root / "KernelBench" / f"level{level}").glob("*_*.py")
            specs += [f"{level}/{n}" for n in sorted(int(f.name.split("_")[0]) for f in files)]
        else:
            specs.append(spec)
    return [s for s in specs if s not in done]


def _done(files: list[Path]) -> set[str]:
    """Problems with an A/A verdict other than an error in earlier results files."""
    done = set()
    for path in files:
        for line in path.read_text().splitlines() if path.is_file() else []:
            row = json.loads(line)
            if (row.get("aa") or {}).get("verdict") not in (None, "error"):
                done.add(row["problem"])
    return done


def write_shims() -> Path:
    """A temporary folder of SHIMS (not under --out: the device returns only 8 files)."""
    shims = Path(tempfile.mkdtemp(prefix="kb-shims-"))
    for name, text in SHIMS.items():
        (shims / name).write_text(text)
    return shims


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--problems", required=True, help="level/number, comma-separated: 1/40,2/12")
    parser.add_argument("--out", type=Path, default=Path("gpu-out"))
    parser.add_argument("--time-budget", type=float, default=2.0)
    parser.add_argument("--max-seconds", type=float, default=480.0, help="start no problem after this")
    parser.add_argument("--no-kernelbench", action="store_true")
    parser.add_argument("--aa-only", default="", help="problems (level/number, comma-separated) run A/A only: "
                                                      "large ones whose KernelBench figure is already recorded; "
                                                      "'all': every problem (a sweep for verdicts)")
    parser.add_argument("--skip-done", type=Path, nargs="*", default=[],
                        help="results files (jsonl) whose problems already have an A/A verdict: not run again")
    args = parser.parse_args()
    args.problems = ",".join(_expand(args.kernelbench, args.problems, _done(args.skip_done)))
    args.out.mkdir(parents=True, exist_ok=True)
    shims = write_shims()
    results = args.out / "kernelbench_acceptance.jsonl"
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.problems.split(","):
            if time.monotonic() - started > args.max_seconds:
                print(f"{spec}: not run (over --max-seconds)", flush=True)
                continue
            problem = _problem_file(args.kernelbench, spec, Path(tmp))
            source = problem.read_text()
            aa, compiled = Path(tmp) / f"aa_{problem.name}", Path(tmp) / f"compiled_{problem.name}"
            aa.write_text(source + AA)
            compiled.write_text((GPU_DATA / "cuda_inline.py").read_text() if spec.startswith("inline/")
                                else source + COMPILED)
            row = {"problem": spec, "name": problem.stem,
                   "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
            # An inline/N row is about its candidate (an A/A of y = 2x + 1 tells nothing the others do not).
            row["aa"] = {} if spec.startswith("inline/") else _kforge(problem, aa, args.time_budget, 600)
            aa_only = args.aa_only == "all" or spec in args.aa_only.split(",")
            row["compile_kforge"] = {} if aa_only else _kforge(problem, compiled, args.time_budget, 600)
            if not args.no_kernelbench and not aa_only:
                row["compile_kernelbench"] = _kernelbench(args.kernelbench, shims, problem, compiled, 600)
            rows.append(row)
            with results.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
            a, c, k = row["aa"], row["compile_kforge"], row.get("compile_kernelbench", {})
            per_call = (a.get("per_call_ms") or {}).get("baseline") or {}
            print(f"{spec} {problem.stem}: A/A {a.get('speedup')} CI {a.get('ci')} [{a.get('verdict')}, {a.get('mode')},"
                  f" device {per_call.get('device', 0):.3f} eager {per_call.get('eager', 0):.3f} host "
                  f"{per_call.get('host_issue', 0):.3f} ms,"
                  f" {a.get('wall_s')} s] | compile kforge {c.get('speedup')} CI {c.get('ci')} [{c.get('verdict')}, "
                  f"{c.get('wall_s')} s] | KernelBench {k.get('speedup')} [{k.get('correct')}, {k.get('wall_s')} s]"
                  f"{' ' + k['error'][-200:] if k.get('error') else ''}", flush=True)
            for side in ("aa", "compile_kforge"):
                print(f"  {side} phases: {json.dumps(row[side].get('phases'))} fit: {row[side].get('memory_fit')}"
                      + (f" reason: {row[side].get('reason')}" if row[side].get("verdict") != "pass" else ""), flush=True)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
