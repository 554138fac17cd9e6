"""What the pool's queue carries: draining it keeps the jobs and drops the stop markers."""

from __future__ import annotations

import queue
from concurrent.futures import Future

from kforge_bot.scaleout.jobs import STOP, Job, drain


def test_drain_takes_every_waiting_job_and_drops_stop_markers() -> None:
    ready: queue.Queue = queue.Queue()
    jobs = [Job(spec=None, candidate=f"c{i}", settings=None, seeds=[i], baseline=None, future=Future()) for i in range(3)]
    for item in (jobs[0], STOP, jobs[1], STOP, jobs[2]):
        ready.put(item)
    assert drain(ready) == jobs
    assert ready.empty() and drain(ready) == []


def test_a_job_records_when_it_was_submitted_and_that_it_needs_no_build_by_default() -> None:
    job = Job(spec=None, candidate=None, settings=None, seeds=[1], baseline=None, future=Future())
    assert job.submitted > 0 and job.prepare == "not needed" and job.prepare_s is None
