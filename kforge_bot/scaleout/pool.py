"""An evaluation pool on one host: one long-lived slot per device, a queue of jobs, results as futures.

- A slot is a process (spawned, so it holds no state of the bot's) that drives `evaluate()` for one device.
  Its environment pins the device with the kind's visibility variable (CUDA_VISIBLE_DEVICES=i,
  ZE_AFFINITY_MASK=i), so the evaluation children it starts see that device only, and the parent-side
  comparison `evaluate()` does on the GPU happens on that device too. A slot runs one job at a time:
  two timing runs never share a device.
- A thread in the bot drives each slot: it takes the next job from the shared queue, hands it over and
  waits. A candidate that crashes or hangs is the sandbox's business (its child is killed and the verdict
  says so). A slot process that dies (a candidate can signal its parent) or stops answering is reported
  as that candidate's crash; the slot is replaced, its orphans are killed, and queued jobs stay queued.
- Compile-ahead: a candidate that builds a torch C++/CUDA extension at import is first imported on the
  host's CPU cores, in a sandboxed child that sees no GPU, with the same per-source extension folders
  (KFORGE_EXTENSIONS_ROOT, see kforge_bot.evaluate.worker.importing) and TORCH_CUDA_ARCH_LIST as the slot's own
  children. The job joins the device queue only once prepared, so the slot finds the build done and
  compile time hides behind other candidates' measurements.

Which file does what: `devices.py` (the devices slots go on), `jobs.py` (what the queue carries),
`slots.py` (a slot process and the thread that drives it), `orphans.py` (finding and killing a dead
slot's children), `compile_ahead.py` (builds on the CPU before a slot takes the job), and this module,
the pool that ties them together.
"""


from __future__ import annotations

import json
import os
import queue
import secrets
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.scratch import remove_scratch
from kforge_bot.evaluate.references import REFERENCE_TIMEOUT_S, Progress
from kforge_bot.scaleout.compile_ahead import (PREPARE_TIMEOUT_S, candidate_imports, kernel_as_written_steps,
                                               needs_build, prepare_build)
from kforge_bot.scaleout.devices import VISIBILITY, Device, discover_devices
from kforge_bot.scaleout.jobs import STOP, Job, drain
from kforge_bot.scaleout.slots import Slot


class EvalPool:
    """Slots on this host's devices, fed from one queue; `submit` returns a Future of a PoolResult.

        with EvalPool("cuda") as pool:            # one slot per GPU
            futures = [pool.submit(spec, c, settings, seeds) for c in candidates]
            results = [f.result() for f in futures]

    `workers`: slots wanted (GPUs: at most one per device; CPU: default 1). `compile_ahead`: None decides per
    candidate (sources that build a torch extension); False never. `slot_deadline_s`: how long a slot may
    take over one job before it counts as hung (default: the candidate's timeout plus the reference's).
    """

    executor = "local"

    def __init__(self, target: str, *, workers: int | None = None, devices: list[Device] | None = None,
                 compile_ahead: bool | None = None, prepare_workers: int | None = None,
                 slot_deadline_s: float | None = None, scratch: str | Path | None = None) -> None:
        self.kind = target
        self.devices = devices if devices is not None else discover_devices(target, workers)
        if not self.devices:
            raise KforgeError("the evaluation pool has no device to run on", hint="check --workers and --target")
        self.token = secrets.token_hex(6)
        self._own_scratch = scratch is None
        self.scratch = Path(tempfile.mkdtemp(prefix="kforge-pool-")) if scratch is None else Path(scratch)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.extensions_root = self.scratch / "extensions"
        self.extensions_root.mkdir(exist_ok=True)
        self.build_env = {"KFORGE_EXTENSIONS_ROOT": str(self.extensions_root)}
        arch = next((d.capability for d in self.devices if d.capability), "")
        if arch and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
            self.build_env["TORCH_CUDA_ARCH_LIST"] = arch  # builds made without a GPU must target this one
        self.compile_ahead = compile_ahead
        self._prepared: dict[str, threading.Event] = {}
        self._prepared_lock = threading.Lock()
        self._slot_deadline_s = slot_deadline_s
        self._ready: queue.Queue[Any] = queue.Queue()
        workers_cpu = prepare_workers or max(1, min(8, (os.cpu_count() or 2) // 2))
        self._prepare = ThreadPoolExecutor(max_workers=workers_cpu, thread_name_prefix="kforge-prepare")
        self.prepare_workers = workers_cpu
        self._closed = False
        self._aborting = False
        self.slots = [Slot(self, i, d) for i, d in enumerate(self.devices)]
        for slot in self.slots:
            slot.thread.start()

    # -- facts ------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.slots)

    def describe(self) -> str:
        return f"{self.size} slot(s): " + ", ".join(s.device.describe() for s in self.slots)

    def slot_deadline_s(self, settings: Any) -> float:
        """How long one job may hold a slot before it counts as hung: more than one evaluation's `timeout_s` (the
        candidate's worker), as the job also runs the reference's and is handed over to the slot."""
        if self._slot_deadline_s is not None:
            return self._slot_deadline_s
        return float(settings.timeout_s) + REFERENCE_TIMEOUT_S + 120.0

    @property
    def aborting(self) -> bool:
        """Whether `abort` was called: a slot drops the evaluation it is running rather than finish it."""
        return self._aborting

    def next_ready(self) -> Any:
        """The next job whose preparation (compiling ahead) is done, for a slot to run; STOP once the pool closes.
        Blocks until there is one."""
        return self._ready.get()

    @property
    def replaced(self) -> int:
        return sum(s.replaced for s in self.slots)

    # -- work -------------------------------------------------------------------------------------

    def submit(self, spec: Any, candidate: Any, settings: Any, seeds: list[int], *, baseline: Any = None,
               progress: Progress | None = None) -> Future:
        if self._closed:
            raise RuntimeError("the evaluation pool is closed")
        job = Job(spec, candidate, settings, list(seeds), baseline, Future(), progress)
        ahead = self.compile_ahead if self.compile_ahead is not None else needs_build(candidate.source)
        if not ahead:
            self._ready.put(job)
            return job.future
        env = dict(self.build_env)
        for var in {VISIBILITY[d.kind] for d in self.devices if d.kind in VISIBILITY}:
            env[var] = ""  # compile on the CPU: no GPU in sight

        def prepare() -> None:
            try:
                timeout = min(PREPARE_TIMEOUT_S, float(settings.timeout_s))
                self._prepare_kernel_as_written(spec, baseline, env, timeout, settings)
                job.prepare, job.prepare_s = prepare_build(spec, candidate_imports(spec, candidate, baseline), env,
                                                           timeout, settings)
            except BaseException as exc:  # noqa: BLE001 - never lose the job over its preparation
                job.prepare = f"failed: {exc}"
            finally:
                self._ready.put(job)

        self._prepare.submit(prepare)
        return job.future

    def _prepare_kernel_as_written(self, spec: Any, baseline: Any, env: dict[str, str], timeout_s: float,
                                   settings: Any) -> None:
        """Build the baseline, reference and inputs once per pool, each in a child of its own
        (compile_ahead.kernel_as_written_steps), so no slot rebuilds them for every candidate."""
        key = json.dumps([spec.to_dict(), baseline.to_dict() if baseline else None], sort_keys=True, default=str)
        with self._prepared_lock:
            done = self._prepared.get(key)
            if done is None:
                done = self._prepared[key] = threading.Event()
                first = True
            else:
                first = False
        if first:
            try:
                for imports in kernel_as_written_steps(spec, baseline):
                    prepare_build(spec, imports, env, timeout_s, settings)
            finally:
                done.set()
        done.wait()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._prepare.shutdown(wait=not self._aborting, cancel_futures=self._aborting)
        for _ in self.slots:
            self._ready.put(STOP)
        for slot in self.slots:
            slot.thread.join(timeout=60)
        if self._own_scratch:
            remove_scratch(self.scratch)

    def abort(self) -> None:
        """Close at once (the run was interrupted): queued jobs are cancelled, and a job a slot is running is
        killed with its slot and evaluation children. Plain `close` lets them finish first, which after a
        Ctrl-C meant waiting minutes for results nobody would read."""
        if self._closed:
            return
        self._aborting = True
        self._prepare.shutdown(wait=False, cancel_futures=True)
        for job in drain(self._ready):
            job.future.cancel()
        self.close()

    def __enter__(self) -> EvalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
