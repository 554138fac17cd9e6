"""The evaluation harness: `evaluate(spec, candidate, target) -> EvalResult`.

Split by the wall between the bot and the code it judges (tests/test_layout.py holds each side to it):

- `evaluate/worker/`: only the sandboxed worker process loads it, the code that imports and runs untrusted kernels:
  its entry point (`worker.entry`, which evaluate.sandbox starts), the candidate role, loading, guards and
  snapshots, the sample server. Nothing of the bot's side is imported there.
- `evaluate/wire/`: what both processes load: the formats that cross the wall (the plan sent in, results, shape
  speedups, tensor files, shared device outputs, limits) and the rules both apply to them (comparisons, the timing
  schedule that pair_driver runs in the parent, statistics, the conditions of a sample). It imports neither side.
- here, at the top: the parent side, in the bot's process: the API, the sandbox that starts workers, the judge,
  the references, the side workers' driver. It never imports `evaluate.worker`.

The parent side stays at the top rather than in a `parent/` room: it is the harness as the rest of the bot knows
it (`kforge_bot.evaluate.evaluate`, `evaluate.api`, `evaluate.sandbox` are imported by commands, gate, scale,
workloads and counters alike), and every other room is the parent's side of the wall too, so only the two parts
the wall sets apart get rooms of their own. This package's own top imports only the wire (`EvalResult` and its
kin): a worker loads it before any module of its own.
"""

from kforge_bot.evaluate.wire.result import VERDICTS, EvalResult, EvalSettings, TimingStats

__all__ = ["VERDICTS", "EvalResult", "EvalSettings", "TimingStats", "evaluate", "ReferenceStore"]


def __getattr__(name: str):
    # The worker imports submodules of this package; keep the parent-side machinery out of its start-up.
    if name == "evaluate":
        from kforge_bot.evaluate.api import evaluate

        return evaluate
    if name == "ReferenceStore":
        from kforge_bot.evaluate.references import ReferenceStore

        return ReferenceStore
    raise AttributeError(name)
