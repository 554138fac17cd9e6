"""Why honest GPU candidates are rejected for hidden work (work run beside the cache flush, or left running after the
timed region) since base and head got workers of their own (issue 38; found on an H100, 2026-12-06; again on
2026-12-07, when `bisect` of Liger-Kernel's RMSNorm rejected a head whose calls only add host work: a
`torch.cuda.device` guard around each launch). Heads against the bundled Triton RMSNorm, each in the layouts asked
for (one worker, the split) with and without profiling, printing the verdict and each side's busy time beside the
settle before its samples and after them (upper quartiles, ms).

Heads (`--heads`, comma-separated):
- `warps2`: NUM_WARPS 2 against the example's 1 (a real change of speed);
- `aa`: the same code (an A/A);
- `guard`: the same kernel launched inside `torch.cuda.device(x.device)`, as Liger-Kernel launches since 91ae44a;
- `hostN`: the same kernel after N us of host work per call (a spin on the host clock): an honest head that is
  only slower to issue its calls.
Every head here is honest, so every verdict must be `pass` (or, for host work past the kernel's own time, a slower
speedup), never `rejected`.

    PYTHONPATH=$PWD python3 benchmarks/busy_before_split.py [--heads aa,guard,host20,host60] [--rows 8192 --cols 4096]
        [--layouts split] [--profile off] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec, load_spec

ENTRY = "def rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:\n"
LAUNCH = "    _rmsnorm_kernel[(triton.cdiv(n_rows, ROWS_PER_PROGRAM),)]("


def head_source(base: str, head: str) -> str:
    """The base's source changed as `head` says (see the module's doc)."""
    if head == "aa":
        return base + "\n"
    if head == "warps2":
        changed = base.replace("NUM_WARPS = 1\n", "NUM_WARPS = 2\n")
    elif head == "guard":
        guarded = "    with torch.cuda.device(x.device):\n    " + LAUNCH
        changed = base.replace(LAUNCH, guarded)
        # The launch's continuation lines move one level in with it.
        head_at = changed.index(guarded) + len(guarded)
        end = changed.index("    return out\n", head_at)
        changed = changed[:head_at] + changed[head_at:end].replace("\n    ", "\n        ") + changed[end:]
    elif head.startswith("host"):
        spin = (f"    _until = time.perf_counter() + {int(head[4:])}e-6\n"
                "    while time.perf_counter() < _until:  # host work only: nothing reaches the device\n"
                "        pass\n")
        changed = base.replace("import torch\n", "import time\nimport torch\n", 1).replace(ENTRY, ENTRY + spin)
    else:
        raise SystemExit(f"--heads: unknown head {head!r} (aa, warps2, guard, hostN)")
    if changed == base:
        raise SystemExit(f"--heads {head}: the example's source no longer has the line this head changes")
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heads", default="warps2,aa")
    parser.add_argument("--rows", type=int, default=0, help="one shape set of rows x cols (default: the manifest's)")
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--layouts", default="one,split", help="one (one worker), split (base and head apart)")
    parser.add_argument("--profile", default="off,on")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--budget", type=float, default=2.0, help="timing budget, seconds")
    args = parser.parse_args()
    spec = load_spec("examples/kforge.yaml", "rmsnorm_triton")
    if args.rows:
        spec = replace(spec, shape_sets=({"rows": args.rows, "cols": args.cols},))
    base = spec.baseline
    heads = {name: replace(base, source=head_source(base.source, name)) for name in args.heads.split(",")}
    for _ in range(args.repeats):
        for name, head in heads.items():
            for layout in args.layouts.split(","):
                for profile in args.profile.split(","):
                    judge(spec, base, name, head, layout == "one", profile == "on", args.budget)


def judge(spec: KernelSpec, base: Implementation, name: str, head: Implementation, one_worker: bool, profile: bool,
          budget: float) -> None:
    settings = EvalSettings(seeds=1, timing_budget_s=budget, profile=profile)
    started = time.monotonic()
    r = evaluate(spec, head, "cuda", settings, baseline=base, one_worker=one_worker)
    timing = (r.details.get("timing") or [{}])[0]
    print(f"{name:8s} {'one worker' if one_worker else 'split':10s} profile={profile!s:5s} "
          f"{r.verdict:10s} {r.speedup if r.speedup is None else round(r.speedup, 3)} "
          f"before={timing.get('busy_before_ms')} after={timing.get('busy_after_ms')} "
          f"calls={timing.get('calls_per_sample')} {time.monotonic() - started:.0f}s "
          f"{r.reason[:150] if r.verdict != 'pass' else ''}", flush=True)


if __name__ == "__main__":
    main()
