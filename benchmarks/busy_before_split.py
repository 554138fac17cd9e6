"""Why honest GPU candidates are rejected for 'work run beside the cache flush' since base and head got workers of
their own (issue 38; found on an H100, 2026-12-06): one candidate (the bundled Triton RMSNorm at NUM_WARPS 2 against
the example's 1) and an A/A, each in both layouts (one worker, the split) with and without profiling, printing the
verdict and each side's busy time beside the settle before its samples (upper quartiles).

    PYTHONPATH=$PWD python3 benchmarks/busy_before_split.py
"""

from __future__ import annotations

import time
from dataclasses import replace

from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import load_spec


def main() -> None:
    spec = load_spec("examples/kforge.yaml", "rmsnorm_triton")
    base = spec.baseline
    head = replace(base, source=base.source.replace("NUM_WARPS = 1\n", "NUM_WARPS = 2\n"))
    assert head.source != base.source
    for name, cand in (("NUM_WARPS 2", head), ("A/A", replace(base, source=base.source + "\n"))):
        for one_worker in (True, False):
            for profile in (False, True):
                settings = EvalSettings(seeds=1, timing_budget_s=2.0, profile=profile)
                started = time.monotonic()
                r = evaluate(spec, cand, "cuda", settings, baseline=base, one_worker=one_worker)
                timing = (r.details.get("timing") or [{}])[0]
                print(f"{name:12s} {'one worker' if one_worker else 'split':10s} profile={profile!s:5s} "
                      f"{r.verdict:10s} {r.speedup if r.speedup is None else round(r.speedup, 3)} "
                      f"before={timing.get('busy_before_ms')} after={timing.get('busy_after_ms')} "
                      f"{time.monotonic() - started:.0f}s {r.reason[:150] if r.verdict != 'pass' else ''}",
                      flush=True)


if __name__ == "__main__":
    main()
