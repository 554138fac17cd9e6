"""The program an outside profiler runs: one call of one implementation, marked so the profiler sees only it.

`python -c "...profiled_worker import main; main(argv)" REQUEST.json`, started under `ncu` (CUDA) or `unitrace`
(Intel XPU) by kforge_bot.counters.profiled_run inside the same sandbox as every other worker. The profiled
call is marked for both tools: an NVTX range named RANGE (ncu filters on it with --nvtx-include) and, for
unitrace's --conditional-collection, PTI_ENABLE_COLLECTION set to 1 in this process's environment for the call. It builds the implementation as the candidate's worker does (the
spec's init seed, shape set 0's inputs from a fresh seed), calls it once outside the range (compilation,
autotuning and first-use loads are not what the counters should describe, and ncu replays every profiled
kernel 15 or more times), then once inside it. Nothing here decides a verdict: the counters are evidence for
the analyst, the tuner and the follow-up PR. Its own prints go to a log file, never to ncu's output.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

RANGE = "kforge_call"
COLLECTION_SWITCH = "PTI_ENABLE_COLLECTION"


def main(argv: list[str]) -> None:
    request_path = Path(argv[0])
    request = json.loads(request_path.read_text())
    status_path = Path(request["status_file"])
    # ncu writes its CSV to the stdout it shares with this process: the program's own output goes elsewhere.
    log = os.open(request["log_file"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        _profile_one_call(request)
        status_path.write_text(json.dumps({"status": "ok"}))
    except Exception as exc:  # noqa: BLE001 - the implementation's failure, reported as the counters' absence
        status_path.write_text(json.dumps({"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:500],
                                           "detail": traceback.format_exc()[-2000:]}))
    sys.stdout.flush()
    os._exit(0)


def _profile_one_call(request: dict) -> None:
    # Here, not at the top: the bot imports this module for RANGE (counters.ncu) and must not import torch.
    import torch

    from kforge_bot.evaluate.worker import importing, loading
    from kforge_bot.kernelspec import Implementation, KernelSpec
    from kforge_bot.targets import make_target

    spec = KernelSpec.from_dict(request["spec"])
    implementation = Implementation.from_dict(request["implementation"])
    workdir = Path(request["workdir"])
    target = make_target(request["target"])
    device = target.device
    torch.zeros(1, device=device)
    inputs_module = importing.import_implementation(spec.inputs_source, workdir, "inputs", spec.support)
    module = importing.import_implementation(implementation, workdir, "profiled", spec.support)
    fn = loading.build_callable(loading.lookup(module, implementation.symbol, implementation.filename), spec,
                                inputs_module, device, int(request["init_seed"]))
    inputs = loading.make_inputs(spec, inputs_module, spec.shape_sets[0], int(request["seed"]), device)
    loading.call(fn, inputs)  # warm: builds, autotuning, lazy loads happen here, outside the range
    target.synchronize()
    marked = device.type == "cuda"  # the range is what ncu filters on; elsewhere (tests on CPU) there is none
    if marked:
        torch.cuda.nvtx.range_push(RANGE)
    os.environ[COLLECTION_SWITCH] = "1"  # setenv(3): what unitrace's conditional collection reads
    loading.call(fn, inputs)
    target.synchronize()
    os.environ[COLLECTION_SWITCH] = "0"
    if marked:
        torch.cuda.nvtx.range_pop()
