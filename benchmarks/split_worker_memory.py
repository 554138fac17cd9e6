"""Each worker's peak memory in one evaluation, base and head in workers of their own against one worker for both
(issue 38: what the fit estimate, evaluate.wire.plan.memory_needs, must count).

    python benchmarks/split_worker_memory.py [--mib 256] [--target cpu]

A problem of one input and one output of --mib MiB each (x * 2 + 1), its head a copy in another checkout (so the
head's inputs are shipped, as in the gate). Every python process's peak resident memory (VmHWM) is polled from
/proc while the evaluation runs, for both layouts in turn; the rows say which process started when.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

PROBLEM = '''import torch
N = {n}

class {cls}(torch.nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0

def get_inputs():
    return [torch.rand(N)]

def get_init_inputs():
    return []
'''


class Peaks:
    """VmHWM of every python process but this one, polled every 0.1 s."""

    def __init__(self) -> None:
        self.seen: dict[int, dict[str, float]] = {}
        self.start = time.monotonic()
        self.done = threading.Event()
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self) -> None:
        while not self.done.is_set():
            for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
                if pid == os.getpid():
                    continue
                try:
                    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                                  if ":" in line)
                except OSError:
                    continue
                if "python" not in fields.get("Name", "") or "VmHWM" not in fields:
                    continue
                now = round(time.monotonic() - self.start, 1)
                row = self.seen.setdefault(pid, {"first_s": now})
                row.update(peak_mib=round(int(fields["VmHWM"].split()[0]) / 1024), last_s=now)
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--target", default="cpu")
    args = parser.parse_args()
    from kforge_bot.evaluate.api import evaluate
    from kforge_bot.evaluate.wire.result import EvalSettings
    from kforge_bot.kernelspec import Implementation, load_spec

    n = args.mib * 1024 * 1024 // 4
    with tempfile.TemporaryDirectory() as tmp:
        base, head = Path(tmp, "base"), Path(tmp, "head")
        base.mkdir()
        head.mkdir()
        (base / "problem.py").write_text(PROBLEM.format(n=n, cls="Model"))
        source = PROBLEM.format(n=n, cls="ModelNew")
        (head / "problem.py").write_text(source)
        spec = load_spec(base / "problem.py")
        candidate = Implementation(source, "ModelNew", "problem.py", str(head))
        for one_worker in (False, True):
            peaks = Peaks()
            result = evaluate(spec, candidate, args.target, EvalSettings(seeds=2, timing_budget_s=2.0, profile=False),
                              one_worker=one_worker)
            peaks.done.set()
            time.sleep(0.2)
            print(f"{'one worker' if one_worker else 'split'}: {result.verdict}; input and output {args.mib} MiB, "
                  f"{result.details.get('fit', {})}")
            for pid, row in sorted(peaks.seen.items(), key=lambda kv: kv[1]["first_s"]):
                print(f"  pid {pid}: peak {row['peak_mib']} MiB, alive {row['first_s']}-{row['last_s']} s")


if __name__ == "__main__":
    main()
