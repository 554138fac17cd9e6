"""What this machine's Nsight Compute can do, for the metric set in kforge_bot/counters/ncu_metrics.py.

Prints ncu's version and where it lives, whether profiling counters are root-only, which of the set's metric
names ncu knows on this GPU, and runs one recorded collection of a small program (a Triton kernel and two
torch ops) unsandboxed and inside the workers' sandbox. Raw CSVs go to --out: the parser's test data.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kforge_bot.counters.ncu_metrics import all_metric_names
from kforge_bot.evaluate import isolation

PROGRAM = '''
import torch, triton, triton.language as tl

@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 2.0, mask=offs < n)

x = torch.randn(1 << 24, device="cuda")
y = torch.empty_like(x)
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("kforge_call")
scale[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
z = torch.softmax(y.view(4096, -1), dim=1)
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("ok", float(z.sum()))
'''


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ncu = shutil.which("ncu")
    print("ncu:", ncu, "->", ncu and os.path.realpath(ncu))
    if not ncu:
        return
    print(subprocess.run([ncu, "--version"], check=False, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    params = Path("/proc/driver/nvidia/params")
    if params.exists():
        print([ln for ln in params.read_text().splitlines() if "Profiling" in ln])
    query = subprocess.run([ncu, "--query-metrics", "--csv"], check=False, capture_output=True, text=True)
    (args.out / "ncu_query_metrics.csv").write_text(query.stdout)
    known = query.stdout
    base_names = {n.rsplit(".", 1)[0] if n.count(".") and n.split(".")[-1] in ("sum", "avg", "max", "min", "pct", "ratio") else n
                  for n in all_metric_names()}
    missing = [n for n in sorted(base_names) if n.split(".")[0] not in known]
    print("query rc", query.returncode, "lines", len(known.splitlines()), "base names missing:", missing)
    work = Path(tempfile.mkdtemp(prefix="ncu-probe-"))
    (work / "one_call.py").write_text(PROGRAM)
    metrics = ",".join(all_metric_names())
    base = [ncu, "--clock-control", "none", "--metrics", metrics, "--nvtx", "--nvtx-include", "kforge_call/",
            "--csv", "--page", "raw", "--print-units", "base"]
    for name, wrap in (("unsandboxed", None), ("sandboxed", True)):
        argv = [*base, sys.executable, str(work / "one_call.py")]
        env = dict(os.environ)
        if wrap:
            ncu_home = str(Path(os.path.realpath(ncu)).parent)
            # The ncu on PATH is a launcher that looks for its nsight-compute folder beside CUDA or in /opt/nvidia.
            extra = [Path(ncu_home)] + [Path(d) for d in ("/opt/nvidia",) if os.path.isdir(d)]
            view = isolation.View(scratch=work, readable=tuple(extra), devices="cuda")
            argv = isolation.command(argv, view)
            env = isolation.environment({k: v for k, v in env.items() if not k.endswith("TOKEN")}, view)
        started = time.monotonic()
        proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, cwd=work)
        print(f"{name}: rc {proc.returncode} in {time.monotonic() - started:.1f} s; stdout {len(proc.stdout)} chars")
        print("  stderr:", proc.stderr.strip()[-800:])
        print("  head:", proc.stdout[:600].replace("\n", " | "))
        (args.out / f"ncu_raw_{name}.csv").write_text(proc.stdout + "\n#stderr\n" + proc.stderr)
    # The details page (sections) of the same program, for a human's reading: what ncu's own rules say.
    proc = subprocess.run([ncu, "--clock-control", "none", "--section", "SpeedOfLight", "--section", "Occupancy",
                           "--section", "LaunchStats", "--nvtx", "--nvtx-include", "kforge_call/", "--csv",
                           "--page", "details", sys.executable, str(work / "one_call.py")],
                          check=False, capture_output=True, text=True, cwd=work)
    print("details rc", proc.returncode, len(proc.stdout))
    (args.out / "ncu_details.csv").write_text(proc.stdout)


if __name__ == "__main__":
    main()
