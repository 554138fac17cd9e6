"""GPU MODE problems checked as they are: `kforge-bot check PROBLEM_DIR --candidate FILE` on five problems of their
single-GPU Python track (pmpp_v2), each with an honest candidate and a wrong one.

    python benchmarks/gpumode_h200.py --problems .gpumode/reference-kernels/problems/pmpp_v2 --out $OUT
    python benchmarks/gpumode_h200.py --cpu --out /tmp/gm        # the CPU fixtures of tests/data/gpumode instead

The problems and their example submissions are gpu-mode/reference-kernels, carried into an ignored folder
(.gpumode/, fetched, never committed). The honest candidates are their public example submissions (a Triton kernel
for vectoradd; the reference's own code, solutions/correct/, for the others, checked with --allow-fallback since
they call the very framework ops the reference does; and, since vectorsum's public one fails GPU MODE's own
check_implementation, a Triton kernel of ours: benchmarks/gpumode_candidates/); the wrong ones are theirs too
(solutions/wrong/: a no-op that returns the unwritten output buffer, a bf16 matmul, a sum that skips 1% of a large
input). Every check is a
subprocess, as a user runs it; each report goes to gpumode_checks.jsonl and a table to gpumode_checks.md.
CUBLAS_WORKSPACE_CONFIG is set as GPU MODE's runners need it: their references enter DeterministicContext, which
turns on torch.use_deterministic_algorithms, and cuBLAS refuses a deterministic GEMM without it.
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

ROOT = Path(__file__).resolve().parents[1]
# (problem, candidate relative to the problem folder, expected: pass | fail, extra flags)
CASES = [
    ("vectoradd_py", "solutions/correct/submission_triton.py", "pass", []),
    ("vectoradd_py", "submission.py", "pass", ["--allow-fallback"]),
    ("grayscale_py", "solutions/correct/ref.py", "pass", ["--allow-fallback"]),
    ("grayscale_py", "solutions/wrong/empty.py", "fail", []),
    ("histogram_py", "solutions/correct/ref.py", "pass", ["--allow-fallback"]),
    ("histogram_py", "solutions/wrong/empty.py", "fail", []),
    ("matmul_py", "solutions/correct/ref.py", "pass", ["--allow-fallback"]),
    ("matmul_py", "solutions/wrong/low-precision.py", "fail", []),
    ("vectorsum_py", "solutions/correct/pytorch.py", "pass", ["--allow-fallback"]),
    ("vectorsum_py", str(ROOT / "benchmarks" / "gpumode_candidates" / "vectorsum_triton.py"), "pass", []),
    ("vectorsum_py", "solutions/wrong/cheat.py", "fail", []),
]
# vectoradd's wrong candidate: GPU MODE ships none; this one adds A to itself.
WRONG_VECTORADD = '''from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    A, B, C = data
    C[...] = A + A
    return C
'''
CPU_CASES = [
    ("scaled_add_py", "submission.py", "pass", []),
    ("scaled_add_py", "../candidates/near_miss.py", "fail", []),
]


def check(problem: Path, candidate: Path, flags: list[str], target: str, budget: float, timeout: float) -> dict:
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=os.environ.get("CUBLAS_WORKSPACE_CONFIG", ":4096:8"))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        started = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-m", "kforge_bot", "check", str(problem), "--candidate",
                                   str(candidate), "--target", target, "--seeds", "2", "--time-budget", str(budget),
                                   "--json", str(report), *flags], capture_output=True, text=True, timeout=timeout,
                                  env=env, cwd=ROOT)
        except subprocess.TimeoutExpired:
            return {"verdict": "harness timeout", "reason": f"the check ran over {timeout:.0f} s"}
        wall = time.monotonic() - started
        if not report.is_file():
            return {"verdict": "error", "exit": proc.returncode, "wall_s": round(wall, 1),
                    "reason": (proc.stderr or proc.stdout).strip()[-600:]}
        data = json.loads(report.read_text())
    details = data.get("details") or {}
    return {"verdict": data["verdict"], "exit": proc.returncode, "reason": data["reason"][:400],
            "speedup": data.get("speedup"), "ci": data.get("speedup_ci"), "wall_s": round(wall, 1),
            "device": data.get("device_name"), "isolation": details.get("isolation"),
            "timed_shape_sets": [t.get("shape_set") for t in details.get("timing") or []],
            "cases_checked": (data.get("correctness") or {}).get("cases_checked"),
            # Each timed set's medians, for the roofline check of the results file.
            "per_set": [{"shape_set": t.get("shape_set"), "reference_ms": (t.get("baseline") or {}).get("median_ms"),
                         "candidate_ms": (t.get("candidate") or {}).get("median_ms"), "speedup": t.get("speedup")}
                        for t in details.get("timing") or []],
            "memory_fit": (details.get("memory_fit") or {}).get("note")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path,
                        default=ROOT / ".gpumode" / "reference-kernels" / "problems" / "pmpp_v2")
    parser.add_argument("--cpu", action="store_true", help="the CPU fixture problems of tests/data/gpumode")
    parser.add_argument("--time-budget", type=float, default=1.5)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--only", default="", help="problems to run, comma-separated")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    target = "cpu" if args.cpu else "cuda"
    root = ROOT / "tests" / "data" / "gpumode" if args.cpu else args.problems
    cases = CPU_CASES if args.cpu else CASES
    extra = args.out / "wrong_vectoradd.py"
    if not args.cpu:
        extra.write_text(WRONG_VECTORADD)
        cases = cases + [("vectoradd_py", str(extra), "fail", [])]
    wanted = set(filter(None, args.only.split(",")))
    rows = []
    started = time.monotonic()
    for problem, candidate, expected, flags in cases:
        if wanted and problem not in wanted:
            continue
        folder = root / problem
        path = Path(candidate) if Path(candidate).is_absolute() else folder / candidate
        if not path.is_file():
            row = {"verdict": "missing", "reason": f"no {path}"}
        else:
            row = check(folder, path, flags, target, args.time_budget, args.timeout)
        row.update(problem=problem, candidate=path.name if path.parent != args.out else "wrong_vectoradd.py (ours)",
                   expected=expected, flags=" ".join(flags))
        row["as_expected"] = (row["verdict"] == "pass") == (expected == "pass") and row["verdict"] not in (
            "error", "missing", "harness timeout")
        rows.append(row)
        print(f"{problem} {row['candidate']}: {row['verdict']} (expected {expected}) {row.get('speedup')} "
              f"{row['reason'][:200]}", flush=True)
        for t in row.get("per_set") or []:
            print(f"  set {t['shape_set']}: reference {t['reference_ms']:.4f} ms, "
                  f"candidate {t['candidate_ms']:.4f} ms, {t['speedup']:.3f}x", flush=True)
    extra.unlink(missing_ok=True)
    device = next((r.get("device") for r in rows if r.get("device")), target)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    (args.out / "gpumode_checks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = [f"# GPU MODE problems checked as they are ({'tests/data/gpumode' if args.cpu else args.problems.name})",
             "", f"{device}, {stamp}; {len(rows)} checks in {time.monotonic() - started:.0f} s; "
             f"{sum(r['as_expected'] for r in rows)} as expected.", "",
             "| problem | candidate | expected | verdict | speedup (95% CI) | timed shape sets | flags | reason |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ci = r.get("ci")
        speed = f"{r['speedup']:.3f}x ({ci[0]:.3f}-{ci[1]:.3f})" if r.get("speedup") and ci else "-"
        reason = r["reason"].replace("|", "/").replace("\n", " ")[:160]
        lines.append(f"| {r['problem']} | {r['candidate']} | {r['expected']} | {r['verdict']} | {speed} | "
                     f"{r.get('timed_shape_sets', '-')} | {r['flags'] or '-'} | {reason} |")
    text = "\n".join(lines) + "\n"
    (args.out / "gpumode_checks.md").write_text(text)
    print(text)
    sys.exit(0 if all(r["as_expected"] for r in rows) else 1)


if __name__ == "__main__":
    main()
