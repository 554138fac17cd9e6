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
  (KFORGE_EXTENSIONS_ROOT, see kforge_bot.evaluate.loading) and TORCH_CUDA_ARCH_LIST as the slot's own
  children. The job joins the device queue only once prepared, so the slot finds the build done and
  compile time hides behind other candidates' measurements.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from kforge_bot.errors import KforgeError

if TYPE_CHECKING:  # the slot imports them itself, after pinning its device
    from kforge_bot.evaluate.api import ReferenceStore
    from kforge_bot.evaluate.spares import SpareWorkers

Progress = Callable[[dict[str, Any]], None]

VISIBILITY = {"cuda": "CUDA_VISIBLE_DEVICES", "xpu": "ZE_AFFINITY_MASK"}
SLOT_MARK = "KFORGE_POOL_SLOT"  # in every slot's environment: finds a dead slot's orphaned children
PREPARE_TIMEOUT_S = 900.0
_STOP = object()


# ------------------------------------------------------------------------------------------ devices


@dataclass(frozen=True)
class Device:
    """One slot's device: `visible` is the value of the kind's visibility variable ('' on the CPU)."""

    kind: str
    visible: str
    name: str = ""
    capability: str = ""  # "9.0" on CUDA: TORCH_CUDA_ARCH_LIST for builds made ahead

    def describe(self) -> str:
        var = VISIBILITY.get(self.kind)
        where = f"{var}={self.visible}" if var else "host CPU"
        return f"{self.name or self.kind} ({where})"


_DISCOVER = r"""
import json, sys, torch
kind = sys.argv[1]
module = getattr(torch, kind)
rows = []
for i in range(module.device_count()):
    cap = ""
    if kind == "cuda":
        major, minor = torch.cuda.get_device_capability(i)
        cap = f"{major}.{minor}"
    rows.append([module.get_device_name(i), cap])
print("KFORGE_DEVICES " + json.dumps(rows), flush=True)
"""


def discover_devices(kind: str, requested: int | None = None, *, environ: dict[str, str] | None = None) -> list[Device]:
    """The devices slots go on. GPUs: every visible device of the first device's model (mixing models would
    mix timings), asked in a child process so the bot never holds a device context. CPU (and MPS): one
    slot unless `requested` says more, since timing runs on shared cores disturb each other."""
    env = dict(os.environ if environ is None else environ)
    if kind not in VISIBILITY:
        count = requested or 1
        return [Device(kind, "", f"{kind} slot {i}") for i in range(count)]
    rows = _query_devices(kind, env)
    var = VISIBILITY[kind]
    listed = [v.strip() for v in env.get(var, "").split(",") if v.strip()] if env.get(var) else []
    devices = []
    for i, (name, cap) in enumerate(rows):
        visible = listed[i] if i < len(listed) else str(i)
        devices.append(Device(kind, visible, name, cap))
    if not devices:
        raise KforgeError(f"no {kind} device is visible to this process",
                          hint="run `kforge-bot doctor`, or pick another --target")
    same = [d for d in devices if d.name == devices[0].name]
    if requested is not None:
        if requested > len(same):
            raise KforgeError(f"{requested} evaluation slots asked for, but this machine has {len(same)} "
                              f"{devices[0].name} device(s); two timing runs must never share one",
                              hint=f"use --workers {len(same)} or fewer")
        same = same[:requested]
    return same


def _query_devices(kind: str, env: dict[str, str]) -> list[tuple[str, str]]:
    from kforge_bot.evaluate.sandbox import scrubbed_environment

    try:
        proc = subprocess.run([sys.executable, "-c", _DISCOVER, kind], capture_output=True, text=True, timeout=180,
                              env=scrubbed_environment(env), check=False)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("KFORGE_DEVICES ")), None)
        if line is not None:
            return [(str(n), str(c)) for n, c in json.loads(line.split(" ", 1)[1])]
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    if kind == "cuda" and shutil.which("nvidia-smi"):
        # torch could not tell (no CUDA build here?): the driver can still count the GPUs.
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [(ln.split(":", 1)[1].split("(UUID")[0].strip(), "") for ln in out.splitlines() if ln.startswith("GPU ")]
    return []


# ------------------------------------------------------------------------------------------ jobs


@dataclass
class PoolResult:
    """One evaluation's result and where and how long it ran."""

    result: Any  # EvalResult
    eval_s: float  # inside evaluate(), in the slot
    queue_s: float = 0.0  # submitted -> a slot took it (compile-ahead included)
    prepare_s: float | None = None  # compile-ahead on the CPU, when it ran
    prepare: str = "not needed"  # "built" | "failed: ..." | "not needed"
    slot: int = -1
    device: str = ""
    started: float = 0.0  # time.monotonic() when the slot took it, and when it finished
    finished: float = 0.0


@dataclass
class _Job:
    spec: Any
    candidate: Any
    settings: Any
    seeds: list[int]
    baseline: Any
    future: Future
    progress: Progress | None = None
    submitted: float = field(default_factory=time.monotonic)
    prepare_s: float | None = None
    prepare: str = "not needed"


def needs_build(source: str) -> bool:
    """A source that builds a torch extension when imported: worth compiling ahead on the CPU."""
    return "load_inline" in source or "cpp_extension" in source


# ------------------------------------------------------------------------------------------ slots


def _slot_main(conn: Any, env: dict[str, str]) -> None:
    """A slot process: pin the device, then evaluate jobs one at a time until told to stop."""
    os.environ.update(env)
    from kforge_bot.evaluate.api import ReferenceStore
    from kforge_bot.evaluate.spares import SpareWorkers

    store = ReferenceStore(Path(env["KFORGE_SLOT_SCRATCH"]))
    # The slot's jobs come one at a time: the next one's worker starts as a job ends (in the slot's scratch,
    # which goes with the slot whatever happens to it).
    spares = SpareWorkers(Path(env["KFORGE_SLOT_SCRATCH"]))
    try:
        _serve(conn, store, spares)
    finally:
        spares.close()


def _serve(conn: Any, store: ReferenceStore, spares: SpareWorkers) -> None:
    from kforge_bot.evaluate.api import evaluate
    from kforge_bot.evaluate.result import EvalSettings
    from kforge_bot.spec import Implementation, KernelSpec

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message is None:
            break
        job_id, data = message

        def progress(msg: dict[str, Any], job_id: int = job_id) -> None:
            if msg.get("type") == "progress":
                try:
                    conn.send((job_id, "progress", msg, 0.0))
                except (OSError, ValueError):
                    pass

        started = time.monotonic()
        try:
            result = evaluate(KernelSpec.from_dict(data["spec"]), Implementation.from_dict(data["candidate"]),
                              data["target"], EvalSettings.from_dict(data["settings"]), seeds=data["seeds"],
                              baseline=Implementation.from_dict(data["baseline"]) if data["baseline"] else None,
                              references=store, progress=progress, spares=spares)
            conn.send((job_id, "ok", result.to_dict(), time.monotonic() - started))
        except KforgeError as exc:
            conn.send((job_id, "kforge_error", {"message": str(exc)}, time.monotonic() - started))
        except Exception as exc:  # noqa: BLE001 - reported as the job's error, the slot lives on
            conn.send((job_id, "error", {"message": f"{type(exc).__name__}: {exc}"}, time.monotonic() - started))


class _Slot:
    """The bot-side driver of one slot process."""

    def __init__(self, pool: EvalPool, index: int, device: Device) -> None:
        self.pool = pool
        self.index = index
        self.device = device
        self.generation = 0
        self.process: Any = None
        self.conn: Any = None
        self.mark = ""
        self.scratch: Path | None = None
        self.replaced = 0  # slot processes that died or hung and were replaced
        self.busy_s = 0.0
        self.thread = threading.Thread(target=self._run, name=f"kforge-slot-{index}", daemon=True)

    # -- the process ------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = {SLOT_MARK: self.mark, "KFORGE_SLOT_SCRATCH": str(self.scratch)}
        var = VISIBILITY.get(self.device.kind)
        if var:
            env[var] = self.device.visible
        env.update(self.pool.build_env)
        return env

    def _start(self) -> None:
        self.generation += 1
        self.mark = f"{self.pool.token}-{self.index}-{self.generation}"
        self.scratch = Path(tempfile.mkdtemp(prefix=f"kforge-slot{self.index}-", dir=self.pool.scratch))
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no torch or device state inherited
        parent, child = ctx.Pipe()
        self.process = ctx.Process(target=_slot_main, args=(child, self._env()), name=f"kforge-slot-{self.index}",
                                   daemon=True)
        self.process.start()
        child.close()
        self.conn = parent

    def _discard(self) -> None:
        """Kill the slot process, the evaluation children it left behind, and its scratch folder."""
        if self.process is not None and self.process.is_alive():
            self.process.kill()
        if self.process is not None:
            self.process.join(timeout=10)
        # A child the slot forked just before it died shows the mark only once it has exec'd: look again.
        for _ in range(10):
            kill_marked(self.mark)
            time.sleep(0.05)
            if not marked_pids(self.mark):
                break
        if self.conn is not None:
            self.conn.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.process = self.conn = None

    def stop(self) -> None:
        if self.process is not None and self.process.is_alive():
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                pass
            self.process.join(timeout=10)
        self._discard()

    # -- the driver thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            job = self.pool._ready.get()
            if job is _STOP:
                self.stop()
                return
            if not job.future.set_running_or_notify_cancel():
                continue
            try:
                job.future.set_result(self._evaluate(job))
            except BaseException as exc:  # noqa: BLE001 - the job's error; the slot goes on
                job.future.set_exception(exc)

    def _evaluate(self, job: _Job) -> PoolResult:
        from kforge_bot.evaluate.result import EvalResult

        taken = time.monotonic()
        if self.process is None or not self.process.is_alive():
            if self.process is not None:
                self._discard()
            self._start()
        job_id = secrets.randbits(48)
        data = {"spec": job.spec.to_dict(), "candidate": job.candidate.to_dict(), "target": self.pool.kind,
                "settings": job.settings.to_dict(), "seeds": list(job.seeds),
                "baseline": job.baseline.to_dict() if job.baseline is not None else None}
        self.conn.send((job_id, data))
        deadline = taken + self.pool.slot_deadline(job.settings)
        failure = ""
        reply: tuple[Any, ...] | None = None
        while reply is None:
            try:
                if self.conn.poll(0.2):
                    got = self.conn.recv()
                    if got[0] != job_id:
                        continue
                    if got[1] == "progress":
                        if job.progress is not None:
                            job.progress({**got[2], "slot": self.index})
                        continue
                    reply = got
                    break
            except (EOFError, OSError):
                pass  # the pipe broke: the process is gone, said below
            if not self.process.is_alive():
                code = self.process.exitcode
                failure = f"died ({_exit_words(code)})"
                break
            if time.monotonic() > deadline:
                failure = f"stopped answering for {self.pool.slot_deadline(job.settings):.0f} s and was killed"
                break
            if self.pool._aborting:
                self._discard()
                raise KforgeError("the evaluation pool was closed while this candidate was being evaluated")
        elapsed = time.monotonic() - taken
        self.busy_s += elapsed
        common = {"queue_s": taken - job.submitted, "prepare_s": job.prepare_s, "prepare": job.prepare,
                  "slot": self.index, "device": self.device.visible, "started": taken,
                  "finished": time.monotonic()}
        if failure:
            self._discard()
            self.replaced += 1
            result = EvalResult(verdict="crash", target=self.pool.kind,
                                reason=f"the evaluation slot on {self.device.describe()} {failure} while evaluating "
                                       "this candidate (a candidate that signals or stops its parent does this); "
                                       "the slot was replaced",
                                details={"slot_failure": failure, "slot": self.index})
            return PoolResult(result, elapsed, **common)
        _, status, payload, eval_s = reply
        if status == "ok":
            return PoolResult(EvalResult.from_dict(payload), eval_s, **common)
        if status == "kforge_error":
            raise KforgeError(payload["message"])
        raise RuntimeError(f"evaluation failed in slot {self.index}: {payload['message']}")


def _exit_words(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def drain(ready: queue.Queue[Any]) -> list[Any]:
    """Take every job still waiting in a pool's queue (stop markers are dropped)."""
    jobs = []
    while True:
        try:
            job = ready.get_nowait()
        except queue.Empty:
            return jobs
        if job is not _STOP:
            jobs.append(job)


def marked_pids(mark: str) -> list[int]:
    """Every process (but this one) whose environment carries SLOT_MARK=mark. Linux /proc only; elsewhere
    nothing is found."""
    if not mark:
        return []
    needle = f"{SLOT_MARK}={mark}".encode() + b"\0"
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read() + b"\0"
        except OSError:
            continue
        if needle in environ:
            found.append(int(entry))
    return found


def kill_marked(mark: str) -> int:
    """SIGKILL every process marked with `mark` (a dead slot's evaluation children, which live in their own
    sessions) and its process group; returns how many there were."""
    killed = 0
    for pid in marked_pids(mark):
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, PermissionError):
            pass
    return killed


# ------------------------------------------------------------------------------------------ compile-ahead


_PREPARE = r"""
import json, sys
from pathlib import Path
from kforge_bot.spec import Implementation, KernelSpec
from kforge_bot.evaluate import loading
data = json.loads(sys.stdin.read())
spec = KernelSpec.from_dict(data["spec"])
baseline = Implementation.from_dict(data["baseline"]) if data["baseline"] else spec.baseline
work = Path(sys.argv[1])
# The candidate worker's own import order (kforge_bot.evaluate.worker.run_candidate): extension versions
# (name, name_v1, ...) follow it, and a build is found again only under the same name.
loading.import_implementation(spec.inputs_source, work, "inputs")
loading.import_implementation(baseline, work, "baseline")
loading.import_implementation(spec.reference, work, "reference")
if data["candidate"]:
    loading.import_implementation(Implementation.from_dict(data["candidate"]), work, "candidate")
print("KFORGE_PREPARED", flush=True)
"""


def prepare_build(spec: Any, candidate: Any, baseline: Any, env: dict[str, str], timeout_s: float,
                  settings: Any = None) -> tuple[str, float]:
    """Import the candidate (after the kernel as written, as the worker does) in a sandboxed child that sees
    no GPU, so its extension builds land in the shared per-source folders. Returns (status, seconds); a
    failure is only noted: the slot's evaluation then meets the compile error and reports it itself.

    With `candidate` None, the kernel as written, its reference and inputs are built instead. Inside the OS
    sandbox a child may write only the folders of the sources it prepares (the candidate's, or those
    three): no source's code can plant a build that another source's import would load."""
    from kforge_bot.evaluate import isolation
    from kforge_bot.evaluate.api import sandbox_view
    from kforge_bot.evaluate.result import EvalSettings
    from kforge_bot.evaluate.sandbox import scrubbed_environment

    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="kforge-prepare-"))
    payload = json.dumps({"spec": spec.to_dict(), "candidate": candidate.to_dict() if candidate else None,
                          "baseline": baseline.to_dict() if baseline is not None else None})
    child_env = scrubbed_environment({**os.environ, **env})
    argv = [sys.executable, "-c", _PREPARE, str(work)]
    try:
        view = sandbox_view(spec, [candidate, baseline], "cpu", work, settings or EvalSettings())
        if view is not None:
            root = Path(env["KFORGE_EXTENSIONS_ROOT"])
            own = [candidate] if candidate else [spec.inputs_source, baseline or spec.baseline, spec.reference]
            writable = tuple(root / impl.digest for impl in own)
            for folder in writable:
                folder.mkdir(parents=True, exist_ok=True)
            view = isolation.View(scratch=work, readable=view.readable + (root,), writable=writable, devices="cpu")
            child_env = isolation.environment(child_env, work)
            argv = isolation.command(argv, view)
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=child_env, cwd=str(work), start_new_session=True)
        try:
            out, _ = proc.communicate(payload.encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _killpg(proc)
            proc.communicate()
            return f"failed: timed out after {timeout_s:.0f} s", time.monotonic() - started
        finally:
            _killpg(proc)  # a compiler or stray thread left behind goes with its group
        text = out.decode("utf-8", errors="replace")
        if "KFORGE_PREPARED" in text:
            return "built", time.monotonic() - started
        tail = [ln for ln in text.strip().splitlines() if ln.strip()][-1:] or [f"exit status {proc.returncode}"]
        return f"failed: {tail[0][:300]}", time.monotonic() - started
    except OSError as exc:
        return f"failed: {exc}", time.monotonic() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------------------------------ the pool


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
        self.slots = [_Slot(self, i, d) for i, d in enumerate(self.devices)]
        for slot in self.slots:
            slot.thread.start()

    # -- facts ------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.slots)

    def describe(self) -> str:
        return f"{self.size} slot(s): " + ", ".join(s.device.describe() for s in self.slots)

    def slot_deadline(self, settings: Any) -> float:
        if self._slot_deadline_s is not None:
            return self._slot_deadline_s
        from kforge_bot.evaluate.api import REFERENCE_TIMEOUT_S

        return float(settings.timeout_s) + REFERENCE_TIMEOUT_S + 120.0

    @property
    def replaced(self) -> int:
        return sum(s.replaced for s in self.slots)

    # -- work -------------------------------------------------------------------------------------

    def submit(self, spec: Any, candidate: Any, settings: Any, seeds: list[int], *, baseline: Any = None,
               progress: Progress | None = None) -> Future:
        if self._closed:
            raise RuntimeError("the evaluation pool is closed")
        job = _Job(spec, candidate, settings, list(seeds), baseline, Future(), progress)
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
                job.prepare, job.prepare_s = prepare_build(spec, candidate, baseline, env, timeout, settings)
            except BaseException as exc:  # noqa: BLE001 - never lose the job over its preparation
                job.prepare = f"failed: {exc}"
            finally:
                self._ready.put(job)

        self._prepare.submit(prepare)
        return job.future

    def _prepare_kernel_as_written(self, spec: Any, baseline: Any, env: dict[str, str], timeout_s: float,
                                   settings: Any) -> None:
        """Build the baseline, reference and inputs once per pool, in a child of their own (the candidate's
        child may not write their folders), so no slot rebuilds them for every candidate."""
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
                prepare_build(spec, None, baseline, env, timeout_s, settings)
            finally:
                done.set()
        done.wait()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._prepare.shutdown(wait=not self._aborting, cancel_futures=self._aborting)
        for _ in self.slots:
            self._ready.put(_STOP)
        for slot in self.slots:
            slot.thread.join(timeout=60)
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

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
