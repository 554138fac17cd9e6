"""The worker's runtime guards: threads the candidate starts, and the audit hook that keeps frames and the
garbage collector from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kforge_bot.evaluate.worker.guards import ThreadWatch


def test_thread_watch_tracks_threads_the_candidate_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(threading.Thread, "start", threading.Thread.start)  # undone after the test
    prefix = str(tmp_path / "candidate_")
    watch = ThreadWatch(prefix)
    watch.install()
    release = threading.Event()
    candidate = compile(textwrap.dedent("""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        def launch(release):
            threading.Thread(target=release.wait, name="direct").start()
            pool = ThreadPoolExecutor(1, thread_name_prefix="pooled")
            pool.submit(release.wait)  # started inside the standard library, on the candidate's behalf
            return pool
    """), prefix + "abc/cand.py", "exec")
    namespace: dict = {}
    exec(candidate, namespace)
    pool = namespace["launch"](release)
    ours = threading.Thread(target=release.wait, name="framework")  # started by code that is not the candidate's
    ours.start()
    try:
        assert sorted(watch.running()) == ["direct", "pooled_0"]
    finally:
        release.set()
        pool.shutdown(wait=True)
        ours.join()
    for thread in watch.started:
        thread.join(timeout=5)
    assert watch.running() == []


# ------------------------------------------------------------------------------------ audit guard

AUDIT_CANDIDATE = '''
import gc, inspect, sys, traceback, warnings
from collections import namedtuple
from dataclasses import dataclass
from typing import TypeVar


def attempt(name, fn, results):
    try:
        fn()
        results[name] = "allowed"
    except PermissionError as exc:
        results[name] = str(exc)


def tb_frame():
    try:
        raise ValueError
    except ValueError as exc:
        return exc.__traceback__.tb_frame


def gen():
    yield 1


def make_dataclass():
    @dataclass
    class Point:
        x: int = 0
    return Point


def run(results):
    attempt("sys._getframe", lambda: sys._getframe(0), results)
    attempt("tb_frame", tb_frame, results)
    attempt("gi_frame", lambda: gen().gi_frame, results)
    attempt("inspect.currentframe", inspect.currentframe, results)
    attempt("inspect.stack", inspect.stack, results)
    attempt("traceback.walk_stack", lambda: next(traceback.walk_stack(None)), results)
    attempt("sys._current_frames", sys._current_frames, results)
    attempt("gc.get_objects", gc.get_objects, results)
    attempt("gc.get_referrers", lambda: gc.get_referrers(results), results)
    attempt("namedtuple", lambda: namedtuple("P", "x y"), results)
    attempt("TypeVar", lambda: TypeVar("T"), results)
    attempt("dataclass", make_dataclass, results)
    attempt("warnings.warn", lambda: warnings.warn("w", stacklevel=2), results)
    attempt("traceback.format_exc", traceback.format_exc, results)
'''

AUDIT_DRIVER = '''
import gc, json, sys
from kforge_bot.evaluate.worker.guards import AuditGuard

prefix, source = sys.argv[1], open(sys.argv[2]).read()
guard = AuditGuard(prefix)
guard.install()
namespace = {"__name__": "cand"}
exec(compile(source, prefix + "abc/cand.py", "exec"), namespace)
results = {}
namespace["run"](results)
results["harness sys._getframe"] = "allowed" if sys._getframe(0) is not None else "?"
results["harness gc.get_objects"] = "allowed" if gc.get_objects() else "?"
results["refused"] = guard.refused
print(json.dumps(results))
'''


def test_audit_guard_refuses_frames_and_gc_to_the_candidate_only(tmp_path: Path) -> None:
    # An audit hook stays for the life of its process: run it in a child, not in the test process.
    (tmp_path / "cand.py").write_text(AUDIT_CANDIDATE)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    # 600 s: the child imports torch, which took over 60 s beside two busy loops on a 2-core machine.
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", AUDIT_DRIVER, str(tmp_path / "candidate_"),
                          str(tmp_path / "cand.py")], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)
    for refused in ("sys._getframe", "tb_frame", "gi_frame", "inspect.currentframe", "inspect.stack",
                    "traceback.walk_stack", "sys._current_frames", "gc.get_objects", "gc.get_referrers"):
        assert results[refused].startswith("kforge-bot: refused "), (refused, results[refused])
        assert "(candidate line " in results[refused]
    assert "through inspect.currentframe()" in results["inspect.currentframe"]
    for allowed in ("namedtuple", "TypeVar", "dataclass", "warnings.warn", "traceback.format_exc",
                    "harness sys._getframe", "harness gc.get_objects"):
        assert results[allowed] == "allowed", (allowed, results[allowed])
    assert len(results["refused"]) == 9


def test_a_thread_class_that_answers_for_itself_counts_as_running() -> None:
    import kforge_bot.evaluate.worker.guards as guards

    watch = ThreadWatch(os.path.dirname(__file__) + os.sep)  # this file plays the candidate
    release = threading.Event()

    class Quiet(threading.Thread):
        def is_alive(self) -> bool:
            return False

    original = threading.Thread.start
    try:
        watch.install()
        plain = threading.Thread(target=release.wait)
        quiet = Quiet(target=release.wait)
        plain.start()
        quiet.start()
        running = watch.running()
        assert running[0] == plain.name and running[1] == "Quiet, whose class redefines is_alive"
    finally:
        threading.Thread.start = original
        release.set()
        plain.join()
        quiet.join()
    assert watch.running() == ["Quiet, whose class redefines is_alive"]
    assert guards.ThreadWatch is ThreadWatch
