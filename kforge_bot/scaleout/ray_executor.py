"""The evaluation pool on a Ray cluster (`--executor ray`, `--ray-address`): one actor per device.

Ray places the actors (one GPU each: Ray sets CUDA_VISIBLE_DEVICES in the actor, so the evaluation
children it starts see that GPU alone), ships the jobs and restarts an actor whose process died. An actor
drives `evaluate()` exactly as a local slot does, with its own reference store. A feeder thread per actor
hands it the next job from the shared queue: one job per actor at a time, so two timing runs never share
a GPU. Ray is optional (`pip install 'kforge-bot[ray]'`) and imported only here, only when asked for.

On a multi-host cluster every node needs kforge-bot installed and the kernel's repository at the same
path when the kernel imports local modules (sources travel with the job; local imports do not).
"""

from __future__ import annotations

import os
import queue
import secrets
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.scaleout.devices import VISIBILITY
from kforge_bot.evaluate.references import Progress
from kforge_bot.scaleout.jobs import STOP, PoolResult, drain
from kforge_bot.scaleout.orphans import SLOT_MARK, kill_marked


def import_ray() -> Any:
    try:
        import ray  # optional (the [ray] extra): imported only when --executor ray asks for it
    except ImportError:
        raise KforgeError("--executor ray needs Ray, which is not installed",
                          hint="pip install 'kforge-bot[ray]'") from None
    return ray


class _Actor:
    """Runs in a Ray worker process: evaluate jobs one at a time, with one reference store.

    `mark` goes into the environment of every evaluation child (as a local slot's does). Ray restarts a
    dead actor with the same arguments, so the new incarnation first kills what the dead one left running
    on this node (a candidate that killed its parent sleeps on otherwise), and `reap` kills the children
    of a running evaluation when the pool is aborted."""

    def __init__(self, target: str, mark: str) -> None:
        # In the Ray worker, once Ray has pinned its GPU.
        from kforge_bot.evaluate.references import ReferenceStore
        from kforge_bot.evaluate.spares import SpareWorkers

        self.target = target
        self.mark = mark
        self.orphans_killed = kill_marked(mark)
        os.environ[SLOT_MARK] = mark
        self.store = ReferenceStore()
        # The next job's worker starts while this one's ends, as in a local slot: a worker's interpreter and torch
        # start is a large share of a short evaluation (benchmarks/results/scale_h200.md).
        self.spares = SpareWorkers()
        self.busy = False

    def reap(self, limit_s: float = 20.0) -> int:
        """Kill this actor's evaluation children until the running evaluation gives up (it may start a
        further child after the first is killed), or `limit_s` passes."""
        killed = 0
        deadline = time.monotonic() + limit_s
        while True:
            killed += kill_marked(self.mark)
            if not self.busy or time.monotonic() > deadline:
                return killed
            time.sleep(0.1)

    def close_spares(self) -> None:
        """End the idle worker started for the next job, and the forkserver (the pool is closing)."""
        from kforge_bot.evaluate import forked

        self.spares.close()
        forked.close_all()

    def where(self) -> dict[str, Any]:
        import ray  # optional: see import_ray

        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "orphans_killed": self.orphans_killed}

    def evaluate(self, data: dict[str, Any]) -> tuple[str, Any, float]:
        # In the Ray worker, once Ray has pinned its GPU (as a local slot imports them after pinning its own).
        from kforge_bot.evaluate.api import evaluate
        from kforge_bot.evaluate.wire.result import EvalSettings
        from kforge_bot.kernelspec import Implementation, KernelSpec

        started = time.monotonic()
        self.busy = True
        try:
            result = evaluate(KernelSpec.from_dict(data["spec"]), Implementation.from_dict(data["candidate"]),
                              self.target, EvalSettings.from_dict(data["settings"]), seeds=data["seeds"],
                              baseline=Implementation.from_dict(data["baseline"]) if data["baseline"] else None,
                              references=self.store, spares=self.spares)
        except KforgeError as exc:
            return "kforge_error", str(exc), time.monotonic() - started
        except Exception as exc:  # noqa: BLE001 - the job's error; the actor lives on
            return "error", f"{type(exc).__name__}: {exc}", time.monotonic() - started
        finally:
            self.busy = False
        return "ok", result.to_dict(), time.monotonic() - started


class RayPool:
    """The same interface as kforge_bot.scaleout.pool.EvalPool (`submit` -> Future[PoolResult]), on Ray.

    GPU targets: one actor per GPU of the cluster (or `workers`), each holding one GPU. CPU: `workers`
    actors (default 1), one CPU each. Joins the cluster at `address` (e.g. "ray://head:10001" or
    "head:6379"), else RAY_ADDRESS, else starts a local one."""

    executor = "ray"

    def __init__(self, target: str, *, workers: int | None = None, address: str | None = None) -> None:
        ray = import_ray()
        self.ray = ray
        self.kind = target
        self._owns_ray = False
        if not ray.is_initialized():
            package_root = str(Path(__file__).resolve().parents[2])
            path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
            ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=False,
                     include_dashboard=False, configure_logging=False)
            self._owns_ray = True
        resources = ray.cluster_resources()
        if target in VISIBILITY:  # a device kind pinned one per slot: one GPU per actor
            have = int(resources.get("GPU", 0))
            if have == 0:
                raise KforgeError("the Ray cluster offers no GPU", hint="start its nodes with GPUs, or use --executor local")
            count = min(workers or have, have)
            options: dict[str, Any] = {"num_gpus": 1, "num_cpus": 1}
        else:
            count = workers or 1
            options = {"num_cpus": 1}
        # max_concurrency 2: `reap` must run while `evaluate` does; the feeder still sends one job at a time.
        actor_cls = ray.remote(_Actor).options(max_restarts=-1, max_task_retries=0, max_concurrency=2, **options)
        self._actor_cls = actor_cls
        token = secrets.token_hex(6)
        self.marks = [f"ray-{token}-{i}" for i in range(count)]
        self.actors = [actor_cls.remote(target, mark) for mark in self.marks]
        self.places = ray.get([a.where.remote() for a in self.actors], timeout=600)
        self.replaced = 0
        self._ready: queue.Queue[Any] = queue.Queue()
        self._closed = False
        self._aborting = False
        self._threads = [threading.Thread(target=self._feed, args=(i,), name=f"kforge-ray-{i}", daemon=True)
                         for i in range(count)]
        for t in self._threads:
            t.start()

    @property
    def size(self) -> int:
        return len(self.actors)

    def describe(self) -> str:
        nodes = len({p["node"] for p in self.places})
        return f"{self.size} Ray actor(s) on {nodes} node(s)"

    def submit(self, spec: Any, candidate: Any, settings: Any, seeds: list[int], *, baseline: Any = None,
               progress: Progress | None = None) -> Future:
        if self._closed:
            raise RuntimeError("the Ray pool is closed")
        future: Future = Future()
        data = {"spec": spec.to_dict(), "candidate": candidate.to_dict(), "settings": settings.to_dict(),
                "seeds": list(seeds), "baseline": baseline.to_dict() if baseline is not None else None}
        self._ready.put((data, future, time.monotonic()))
        return future

    def _feed(self, index: int) -> None:
        from kforge_bot.evaluate.wire.result import EvalResult  # not at the top: Ray workers load this module unpinned

        ray = self.ray
        while True:
            job = self._ready.get()
            if job is STOP:
                return
            data, future, submitted = job
            if not future.set_running_or_notify_cancel():
                continue
            taken = time.monotonic()
            try:
                status, payload, eval_s = ray.get(self.actors[index].evaluate.remote(data))
                if self._aborting:
                    raise KforgeError("the evaluation pool was closed while this candidate was being evaluated")
            except ray.exceptions.RayActorError as exc:
                if self._aborting:
                    future.set_exception(KforgeError("the evaluation pool was closed while this candidate was "
                                                     "being evaluated"))
                    return
                # The actor's process died (a candidate can signal its parent); Ray restarts it.
                self.replaced += 1
                why = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
                result = EvalResult(verdict="crash", target=self.kind,
                                    reason=f"the Ray actor evaluating this candidate died ({why}); Ray restarts it",
                                    details={"slot_failure": "actor died", "slot": index})
                future.set_result(PoolResult(result, time.monotonic() - taken, queue_s=taken - submitted,
                                             slot=index, device=self.places[index].get("visible", ""),
                                             started=taken, finished=time.monotonic()))
                self._await_restart(index)  # the next job goes to a live actor, not a restarting one
                continue
            except BaseException as exc:  # noqa: BLE001
                future.set_exception(exc)
                continue
            if status == "kforge_error":
                future.set_exception(KforgeError(payload))
                continue
            if status != "ok":
                future.set_exception(RuntimeError(f"evaluation failed on Ray actor {index}: {payload}"))
                continue
            future.set_result(PoolResult(EvalResult.from_dict(payload), eval_s, queue_s=taken - submitted, slot=index,
                                         device=self.places[index].get("visible", ""), started=taken,
                                         finished=time.monotonic()))

    def _await_restart(self, index: int, limit_s: float = 300.0) -> None:
        ray = self.ray
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            try:
                self.places[index] = ray.get(self.actors[index].where.remote(), timeout=60)
                return
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                time.sleep(0.5)
        # Ray could not bring it back: a fresh actor in its place.
        self.actors[index] = self._actor_cls.remote(self.kind, self.marks[index])
        self.places[index] = ray.get(self.actors[index].where.remote(), timeout=600)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._ready.put(STOP)
        for t in self._threads:
            t.join(timeout=30 if self._aborting else 600)
        try:
            self.ray.get([actor.close_spares.remote() for actor in self.actors], timeout=30)
        except Exception:  # noqa: BLE001 - a dead actor's spare went with it (Ray reaps its children)
            pass
        for actor in self.actors:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self._owns_ray:
            self.ray.shutdown()

    def abort(self) -> None:
        """Close at once (the run was interrupted): queued jobs are cancelled, running evaluations are killed
        with their children (each actor reaps its own: they may be on other nodes), then the actors go."""
        if self._closed:
            return
        self._aborting = True
        for _data, future, _submitted in drain(self._ready):
            future.cancel()
        reaps = [actor.reap.remote() for actor in self.actors]
        try:
            self.ray.get(reaps, timeout=30)
        except Exception:  # noqa: BLE001 - a dead or unreachable actor: killed below all the same
            pass
        self.close()

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
