"""A slot: one long-lived process (spawned, so it holds no state of the bot's) that drives `evaluate()` for
one device, one job at a time, and the thread in the bot that feeds it jobs from the pool's queue and
replaces it when it dies or stops answering."""

from __future__ import annotations

import multiprocessing
import os
import secrets
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.scratch import remove_scratch
from kforge_bot.scaleout.devices import VISIBILITY, Device
from kforge_bot.scaleout.jobs import STOP, Job, PoolResult
from kforge_bot.scaleout.orphans import SLOT_MARK, kill_marked, marked_pids

if TYPE_CHECKING:  # the slot imports them itself, after pinning its device
    from kforge_bot.evaluate.references import ReferenceStore
    from kforge_bot.evaluate.spares import SpareWorkers


class SlotHost(Protocol):
    """What a slot needs of the pool that feeds it (scale.pool.EvalPool): said here, so this module does not import
    the pool, which imports it."""

    kind: str
    token: str
    scratch: Path
    build_env: dict[str, str]

    @property
    def aborting(self) -> bool: ...

    def next_ready(self) -> Any: ...

    def slot_deadline_s(self, settings: Any) -> float: ...


def _slot_main(conn: Any, env: dict[str, str]) -> None:
    """A slot process: pin the device, then evaluate jobs one at a time until told to stop."""
    os.environ.update(env)
    # The evaluation's modules load here, once the device is pinned (this module is the slot's entry point).
    from kforge_bot.evaluate.references import ReferenceStore
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
    # In the slot, after _slot_main pinned its device (as every evaluate import in this module).
    from kforge_bot.evaluate.api import evaluate
    from kforge_bot.evaluate.wire.result import EvalSettings
    from kforge_bot.kernelspec import Implementation, KernelSpec

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


class Slot:
    """The bot-side driver of one slot process."""

    def __init__(self, pool: SlotHost, index: int, device: Device) -> None:
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
            remove_scratch(self.scratch)
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
            job = self.pool.next_ready()
            if job is STOP:
                self.stop()
                return
            if not job.future.set_running_or_notify_cancel():
                continue
            try:
                job.future.set_result(self._evaluate(job))
            except BaseException as exc:  # noqa: BLE001 - the job's error; the slot goes on
                job.future.set_exception(exc)

    def _evaluate(self, job: Job) -> PoolResult:
        from kforge_bot.evaluate.wire.result import EvalResult  # not at the top: the slot loads this module unpinned

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
        deadline = taken + self.pool.slot_deadline_s(job.settings)
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
                failure = f"stopped answering for {self.pool.slot_deadline_s(job.settings):.0f} s and was killed"
                break
            if self.pool.aborting:
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

