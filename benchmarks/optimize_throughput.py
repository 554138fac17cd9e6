"""How many candidates a minute `kforge-bot optimize` judges on a KernelBench problem, with a scripted model.

    python benchmarks/optimize_throughput.py --kernelbench DIR --problem 2/12 --candidates 12 --target cuda --out DIR
    python benchmarks/optimize_throughput.py --problem examples/kernelbench/softmax_problem.py --parallel 4 --crash-at 2 ...

The model is the test suite's scripted OpenAI-compatible server on loopback (tests/fakes/llm_server.py), so
no model latency is counted: every analyst request gets the same short advice, every generator request the
next candidate, a correct `ModelNew` for the problem (the reference's forward through a subclass, each with
its own comment, so no two candidates share a cache entry or a build). The real `kforge-bot optimize` runs
them, one evaluation each, through the real `openai` client. Reported: the wall time of the command, the
time from the first candidate's result to the last, and candidates per minute over each. With `--parallel N`
the command runs with --parallel N (every GPU gets a slot) and each candidate's slot is reported; with
`--crash-at I` candidate I segfaults in its forward (the run must report it and go on).
Needs `openai` (carried as wheels to the GPU machine; see benchmarks/run_h200.sh).
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
sys.path.insert(0, str(ROOT / "tests"))
from fakes.llm_server import ScriptedLLMServer, reply  # noqa: E402

ADVICE = "Recommendations:\n1. Keep the reference's computation; fuse the elementwise steps next."
CANDIDATE = '''

class ModelNew(Model):
    """Scripted candidate {index}: the reference's forward through a subclass."""

    def forward(self, *args):
        return super().forward(*args)
'''
CRASHING = '''

class ModelNew(Model):
    """Scripted candidate {index}: segfaults when run (reads address 0)."""

    def forward(self, *args):
        import ctypes
        ctypes.string_at(0)
        return super().forward(*args)
'''


class RoutingServer(ScriptedLLMServer):
    """Answers the analyst with advice and the generator with the next candidate, whatever the order."""

    def __init__(self, candidates: list[str]) -> None:
        super().__init__(api_key="sk-bench")
        self.candidates = candidates

    def _next(self):  # type: ignore[override]
        body = self.chat_requests[-1]
        system = body["messages"][0]["content"]
        if "performance-analysis agent" in system:
            return reply(ADVICE, prompt_tokens=10, completion_tokens=10)
        with self._lock:
            source = self.candidates.pop(0) if self.candidates else None
        return None if source is None else reply(f"```python\n{source}```", prompt_tokens=10, completion_tokens=10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", type=Path, default=None)
    parser.add_argument("--problem", default="2/12", help="level/number in --kernelbench, or a KernelBench file's path")
    parser.add_argument("--candidates", type=int, default=12)
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--out", type=Path, default=Path("gpu-out"))
    parser.add_argument("--parallel", type=int, default=1, help="optimize --parallel N")
    parser.add_argument("--crash-at", type=int, default=None, help="this candidate (0-based) segfaults")
    args = parser.parse_args()
    if args.kernelbench is None:
        problem = Path(args.problem)
    else:
        level, number = args.problem.split("/")
        problem = sorted((args.kernelbench / "KernelBench" / f"level{level}").glob(f"{number}_*.py"))[0]
    source = problem.read_text()
    candidates = [source + (CRASHING if i == args.crash_at else CANDIDATE).format(index=i)
                  for i in range(args.candidates)]
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, RoutingServer(candidates) as server:
        report = Path(tmp) / "report"
        env = {**os.environ, "KFORGE_CACHE_DIR": str(Path(tmp) / "cache")}
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "kforge_bot", "optimize", str(problem), "--target", args.target,
                               "--iterations", str(args.candidates), "--patience", str(args.candidates), "--base-url", server.base_url,
                               "--api-key", "sk-bench", "--model", "scripted", "--report", str(report),
                               "--no-cache", "--allow-fallback", "--parallel", str(args.parallel)], capture_output=True, text=True, env=env, timeout=3000)
        wall = time.monotonic() - started
        events = [json.loads(line) for line in (report / "trajectory.jsonl").read_text().splitlines()]
    results = [e for e in events if e.get("event") == "result"]
    stamps = [e.get("ts") or e.get("time") for e in results]
    verdicts = [e["result"]["verdict"] for e in results]
    eval_s = [e.get("eval_s") for e in results]
    # Where each evaluation's time went (the report's details.phases): the parent's and the workers' parts.
    phases = [((e["result"].get("details") or {}).get("phases")) for e in results]
    pools = [((e["result"].get("details") or {}).get("pool") or {}) for e in results]
    row = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "problem": f"{args.problem} {problem.stem}",
           "target": args.target, "model": "scripted (loopback OpenAI-compatible server)", "candidates": len(results),
           "parallel": args.parallel, "crash_at": args.crash_at, "verdicts": verdicts, "eval_s": eval_s,
           "slots": [p.get("slot") for p in pools], "devices": [p.get("device") for p in pools],
           "phases": phases, "wall_s": round(wall, 1), "exit": proc.returncode,
           "per_minute_wall": round(60 * len(results) / wall, 2) if wall else None}
    if len(results) > 1 and all(isinstance(s, (int, float)) for s in stamps):
        span = stamps[-1] - stamps[0]
        row["per_minute_after_first"] = round(60 * (len(results) - 1) / span, 2) if span > 0 else None
    if proc.returncode:
        row["stderr"] = proc.stderr[-1500:]
    (args.out / "optimize_throughput.json").write_text(json.dumps(row, indent=1) + "\n")
    print(json.dumps({k: v for k, v in row.items() if k not in ("verdicts", "phases", "eval_s")}), flush=True)
    print("verdicts:", " ".join(f"{v}@slot{s}" for v, s in zip(verdicts, row["slots"])), flush=True)
    for index, phase in enumerate(phases[:3]):
        print(f"candidate {index + 1} phases:", json.dumps(phase), flush=True)


if __name__ == "__main__":
    main()
