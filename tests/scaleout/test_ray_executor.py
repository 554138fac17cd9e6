"""The Ray executor on Ray's own local multi-node test cluster (two nodes, one CPU each)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from fakes.pool_kernels import HANG, KERNEL, KILL_SLOT, SETTINGS, spec_in, variant

from kforge_bot.errors import KforgeError

try:
    import ray  # noqa: F401
    from ray.cluster_utils import Cluster
    HAVE_RAY = True
except ImportError:  # pragma: no cover - the optional extra is missing
    HAVE_RAY = False
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="ray is not installed (optional extra: pip install 'kforge-bot[ray]')")


def test_without_ray_the_flag_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    from kforge_bot.scaleout import make_pool

    with pytest.raises(KforgeError, match=r"pip install 'kforge-bot\[ray\]'"):
        make_pool("cpu", executor="ray")


@pytest.mark.slow
@needs_ray
def test_ray_pool_on_a_two_node_cluster_survives_a_dead_actor_and_aborts_at_once(tmp_path: Path) -> None:
    import time

    import ray

    from kforge_bot.errors import KforgeError
    from kforge_bot.scaleout.orphans import kill_marked, marked_pids
    from kforge_bot.scaleout.ray_executor import RayPool

    spec = spec_in(tmp_path)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    try:
        cluster.wait_for_nodes()
        with RayPool("cpu", workers=2, address=cluster.address) as pool:
            assert len({p["node"] for p in pool.places}) == 2  # one actor on each node
            jobs = {"good0": KERNEL, "kill_actor": KILL_SLOT, "good1": KERNEL}
            # Sandboxed, a candidate cannot reach its actor: the dead-actor path runs with the sandbox off.
            unboxed = replace(SETTINGS, isolation="off")
            futures = {n: pool.submit(spec, variant(spec, src, n), unboxed if n == "kill_actor" else SETTINGS, [5, 6])
                       for n, src in jobs.items()}
            done = {n: f.result(timeout=180) for n, f in futures.items()}
            replaced = pool.replaced
            # Each actor has started the next job's worker: idle, and ended here, so that what is left is the
            # killed actor's candidate alone.
            # The killed actor may still be restarting on a loaded machine: asked again until it answers.
            deadline = time.monotonic() + 60
            for actor in pool.actors:
                while True:
                    try:
                        ray.get(actor.close_spares.remote(), timeout=60)
                        break
                    except ray.exceptions.ActorUnavailableError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.5)
            # The candidate that killed its actor sleeps on in its own session: nothing of it is left running
            # (Ray reaps a dead worker's children; a restarted actor also kills what carries its mark). On a
            # loaded machine that takes a moment: wait for it (marked_pids only looks), then check nothing is left.
            deadline = time.monotonic() + 60
            while any(marked_pids(mark) for mark in pool.marks) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert all(kill_marked(mark) == 0 for mark in pool.marks)

            # An interrupted run: both actors busy with a hanging candidate, a third job queued.
            # Their timeout is far beyond the abort's bound, so only killing them (not waiting) can meet it, however
            # loaded the machine is.
            patient = replace(SETTINGS, timeout_s=600, stall_floor_s=600)
            hanging = [pool.submit(spec, variant(spec, HANG, f"hang{i}"), patient, [1, 2]) for i in range(2)]
            queued = pool.submit(spec, variant(spec, KERNEL, "queued"), SETTINGS, [1, 2])
            deadline = time.monotonic() + 60
            while not all(marked_pids(mark) for mark in pool.marks) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert all(marked_pids(mark) for mark in pool.marks)  # each actor's evaluation child carries its mark
            time.sleep(1.0)  # both hanging candidates are in their sleep
            started = time.monotonic()
            pool.abort()
            assert time.monotonic() - started < 120.0  # at once: their own timeout and no-progress limit are 600 s
            assert queued.cancelled()
            for future in hanging:
                with pytest.raises(KforgeError, match="closed while this candidate was being evaluated"):
                    future.result(timeout=1)
            assert all(kill_marked(mark) == 0 for mark in pool.marks)  # no evaluation child left on any node
        for name in ("good0", "good1"):
            assert done[name].result.verdict == "pass", (name, done[name].result.reason)
        dead = done["kill_actor"].result
        assert dead.verdict == "crash" and "Ray actor" in dead.reason and "died" in dead.reason
        assert replaced == 1
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.slow
@needs_ray
def test_a_ray_actor_starts_the_next_jobs_worker_as_a_local_slot_does(tmp_path: Path) -> None:
    import ray

    from kforge_bot.scaleout.orphans import kill_marked, marked_pids
    from kforge_bot.scaleout.ray_executor import RayPool

    spec = spec_in(tmp_path)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        with RayPool("cpu", workers=1) as pool:
            first, second = (pool.submit(spec, variant(spec, KERNEL, tag), SETTINGS, [5, 6]).result(timeout=180)
                             for tag in ("first", "second"))
            marks = pool.marks
        assert first.result.verdict == second.result.verdict == "pass", (first.result.reason, second.result.reason)
        assert first.result.details["phases"]["worker_started_early"] is False
        assert second.result.details["phases"]["worker_started_early"] is True  # the spare the first left
        # Closing the pool ends the idle spare: the actor's kill is asynchronous, so a loaded host gets a few seconds.
        deadline = time.monotonic() + 20
        while any(marked_pids(mark) for mark in marks) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(kill_marked(mark) == 0 for mark in marks)
    finally:
        ray.shutdown()
