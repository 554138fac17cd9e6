"""One call of one implementation under an outside profiler (ncu, unitrace), inside the workers' sandbox.

The profiler is a separate program wrapped around kforge_bot.counters.profiled_worker: the tool's own argv
ends with `profiled_argv(request)`. Both run inside the same sandbox as every worker that runs user code, with
the tool's install folders shown read-only, the scrubbed environment, a wall-clock limit, bounded output, and
the whole process group ended afterwards. The caller reads what it needs (the captured output, files the
tool wrote under the run's scratch) inside the `with` block; the scratch is removed when it ends.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot.counters import ncu_parse
from kforge_bot.environment import scrubbed_environment
from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.sandbox import kill_group, sandbox_view
from kforge_bot.evaluate.scratch import remove_scratch
from kforge_bot.kernelspec import Implementation, KernelSpec

MAX_OUTPUT = 16 << 20  # bytes of the tool's output kept: a flood from the profiled process cannot fill memory
WORKER = "import sys; from kforge_bot.counters.profiled_worker import main; main(sys.argv[1:])"


@dataclass
class ProfiledRun:
    text: str  # the tool's stdout and stderr together (bounded)
    timed_out: bool
    wall_s: float
    work: Path  # the run's scratch: the tool may write its files here (it is writable inside the sandbox)
    status: dict[str, Any] = field(default_factory=dict)  # the profiled worker's own: {"status": "ok"} or error

    @property
    def call_failed(self) -> str | None:
        """Why the profiled call itself failed (the implementation's fault, not the tool's), or None."""
        return str(self.status.get("reason")) if self.status.get("status") == "error" else None

    def failure(self, tool: str, timeout_s: float) -> dict[str, Any] | None:
        """The collector's answer when the run produced nothing to read (the tool hung, or the call failed)."""
        if self.timed_out:
            return {"available": False, "reason": f"{tool} did not finish within {timeout_s:.0f} s", "wall_s": self.wall_s}
        if self.call_failed:
            return {"available": False, "reason": f"the profiled call failed: {self.call_failed}", "wall_s": self.wall_s}
        return None

    def counters(self, tool: str, label: str, read: Callable[[], list[dict[str, Any]]],
                 unreadable: type[Exception]) -> dict[str, Any]:
        """Every collector's digest of the run, one shape for every tool: the kernels `read` parses from its
        output, their summary and the raw file kept as `<label>.csv`; or why that output could not be read."""
        try:
            rows = read()
        except unreadable as exc:
            return {"available": False, "reason": str(exc), "wall_s": self.wall_s}
        return {"available": True, "tool": tool, "kernels": rows, "summary": ncu_parse.summary(rows),
                "raw_file": f"{label}.csv", "wall_s": self.wall_s}


def profiled_argv(request: Path) -> list[str]:
    """The worker's argv, which the tool's argv ends with."""
    return [sys.executable, "-c", WORKER, str(request)]


@contextmanager
def profiled_call(spec: KernelSpec, implementation: Implementation, target: str, settings: EvalSettings, *,
                  tool_argv: Callable[[Path, Path], list[str]], tool_folders: tuple[Path, ...],
                  extra_env: dict[str, str] | None = None, timeout_s: float) -> Iterator[ProfiledRun]:
    """Run `tool_argv(request, work)` (which ends with `profiled_argv(request)`) once and yield what happened."""
    work = Path(tempfile.mkdtemp(prefix="kforge-profile-"))
    started = time.monotonic()
    try:
        request = work / "request.json"
        request.write_text(json.dumps({
            "spec": spec.to_dict(), "implementation": implementation.to_dict(), "target": target,
            "workdir": str(work / "src"), "seed": secrets.randbits(63), "init_seed": 0,
            "status_file": str(work / "status.json"), "log_file": str(work / "program.log")}))
        (work / "src").mkdir()
        argv, env = tool_argv(request, work), {**scrubbed_environment(), **(extra_env or {})}
        view = sandbox_view(spec, [implementation], target, work, settings)
        if view is not None:
            view = replace(view, readable=tuple(view.readable) + tool_folders)
            env = isolation.environment(env, view)
            argv = isolation.command(argv, view)
        text, timed_out = _run(argv, env, work, timeout_s)
        yield ProfiledRun(text=text, timed_out=timed_out, wall_s=round(time.monotonic() - started, 2), work=work,
                          status=_status(work / "status.json"))
    finally:
        remove_scratch(work)


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> tuple[str, bool]:
    """The tool's output (bounded), and whether it timed out; its whole process group is ended either way."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=str(cwd), start_new_session=True)
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + timeout_s
    timed_out = False
    exited_at: float | None = None
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    while True:
        try:
            data = proc.stdout.read(1 << 16)
        except BlockingIOError:
            data = None
        if data:
            if size < MAX_OUTPUT:
                chunks.append(data[:MAX_OUTPUT - size])
            size += len(data)
            continue
        if data == b"" and proc.poll() is not None:
            break
        if proc.poll() is not None:  # the tool is done; something it started may still hold the pipe open
            exited_at = exited_at or time.monotonic()
            if time.monotonic() - exited_at > 1.0:
                break
        if time.monotonic() > deadline:
            timed_out = True
            break
        time.sleep(0.05)
    kill_group(proc)
    proc.wait()
    return b"".join(chunks).decode("utf-8", errors="replace"), timed_out


_MAX_STATUS_BYTES = 1 << 20


def _status(path: Path) -> dict[str, Any]:
    """The profiled worker's status file, which lies in the scratch its code can write: a plain file or nothing (a
    link would read a file of this machine, a FIFO wait forever, /dev/zero fill the memory)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}
        status = json.loads(os.read(fd, _MAX_STATUS_BYTES))
        return status if isinstance(status, dict) else {}
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
