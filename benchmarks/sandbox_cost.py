"""What the OS sandbox adds to a worker's start: `python -c pass` plain and inside bwrap, side by side.

    python benchmarks/sandbox_cost.py [--runs 30] [--json FILE|-]

Runs alternate (plain, sandboxed, plain, ...) so drift hits both; reports medians and the difference.
The sandbox is built exactly as workers get it (kforge_bot.evaluate.isolation.command), CPU devices, one
readable source folder.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kforge_bot.evaluate import isolation  # noqa: E402


def _time(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--devices", default="cpu")
    parser.add_argument("--json", default=None, help="write the figures here (- for stdout)")
    args = parser.parse_args()
    status = isolation.probe()
    if not status.available:
        raise SystemExit(f"no sandbox here: {status.describe()}")
    plain_argv = [sys.executable, "-c", "pass"]
    plain, boxed = [], []
    with tempfile.TemporaryDirectory() as scratch:
        view = isolation.View(scratch=Path(scratch), readable=(Path(__file__).parent,), devices=args.devices)
        boxed_argv = isolation.command(plain_argv, view)
        for _ in range(args.runs):
            plain.append(_time(plain_argv))
            boxed.append(_time(boxed_argv))
    data = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": platform.node(),
        "cpu": platform.processor() or platform.machine(), "python": sys.version.split()[0], "tool": status.tool,
        "devices": args.devices, "runs": args.runs, "bwrap_arguments": len(boxed_argv) - len(plain_argv),
        "plain_ms": {"median": statistics.median(plain), "min": min(plain)},
        "sandboxed_ms": {"median": statistics.median(boxed), "min": min(boxed)},
    }
    data["added_ms_median"] = data["sandboxed_ms"]["median"] - data["plain_ms"]["median"]
    text = json.dumps(data, indent=1)
    if args.json == "-":
        print(text)
        return
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(f"python -c pass: plain {data['plain_ms']['median']:.1f} ms, sandboxed {data['sandboxed_ms']['median']:.1f} ms"
          f" (median of {args.runs}); the sandbox adds {data['added_ms_median']:.1f} ms")


if __name__ == "__main__":
    main()
