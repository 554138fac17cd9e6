"""Where a worker's start goes on this machine: Python, torch's import, kforge's worker modules, the device's
context, the profiler's first use; plain and inside the sandbox. Prints seconds, one line each."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kforge_bot.evaluate import isolation

STEPS = r'''
import time, sys
t = [time.monotonic()]
def lap(name):
    now = time.monotonic(); print(f"{name} {now - t[0]:.3f}"); t[0] = now
import torch; lap("import_torch")
import kforge_bot.evaluate.worker.entry as w; lap("import_worker")
x = torch.zeros(1, device="cuda"); torch.cuda.synchronize(); lap("cuda_context")
from kforge_bot.evaluate.worker.profile import profile_call
profile_call(lambda: x.add_(1), x.device, torch.cuda.synchronize); lap("profiler_first_use")
profile_call(lambda: x.add_(1), x.device, torch.cuda.synchronize); lap("profiler_second_use")
from kforge_bot.evaluate.worker.snapshot import FunctionSnapshot, framework_state; lap("import_guards")
s = FunctionSnapshot(extra={}); lap("function_snapshot")
s.changed({}); lap("snapshot_compare")
framework_state(); lap("framework_state")
'''


def main() -> None:
    root = str(Path(__file__).resolve().parents[1])
    for name, sandboxed in (("plain", False), ("sandboxed", True)):
        work = Path(tempfile.mkdtemp(prefix="start-"))
        argv = [sys.executable, "-c", STEPS]
        env = {"PYTHONPATH": root, "PATH": "/usr/bin:/bin:/usr/local/bin"}
        if sandboxed:
            view = isolation.View(scratch=work, readable=(Path(root),), devices="cuda")
            argv, env = isolation.command(argv, view), isolation.environment(env, view)
        started = time.monotonic()
        proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=env)
        print(f"{name}: total {time.monotonic() - started:.3f} s rc {proc.returncode}; "
              + "; ".join(proc.stdout.split("\n")) + proc.stderr[-300:])


if __name__ == "__main__":
    main()
