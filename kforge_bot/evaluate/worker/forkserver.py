"""A process that has imported torch and the worker once, and forks each worker from itself (evaluate.forked).

A worker started afresh spends most of its start importing torch (about 1 s of a core of its 1.2 s on the 2-core CI
machine: benchmarks/results/ci_cpu.md), and the suite starts over a thousand. This process runs only trusted code
(the interpreter, torch, the harness; never a request, never user code) and keeps nothing secret: it starts in the
workers' own scrubbed environment. For each start it is sent, over its socket, bwrap's argument list for the
worker's view, the worker's environment and arguments, and its pipes; it forks, and the child enters the same
sandbox bubblewrap would have made (evaluate.worker.own_sandbox), then runs the worker's `main`. The child's pid
goes back to the bot with a pipe on which its exit status arrives. Before the first start it makes one sandbox
and says whether that worked: the bot starts its workers with bubblewrap where it did not.

Run as `python -c "from kforge_bot.evaluate.worker.forkserver import main; main()" FD` (FD: the socket).
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import tempfile
from typing import Any

from kforge_bot.evaluate.wire import forking
from kforge_bot.evaluate.worker import entry, own_sandbox
from kforge_bot.evaluate.worker.parent import die_with_parent


def main() -> None:
    # entry's import asked for SIGKILL when the thread that started this process ends: a pool's thread may have,
    # and this process outlives it. It ends with its socket instead (the bot closed it, or the bot is gone).
    die_with_parent(enabled=False)
    for name in forking.ENTRIES:  # each worker this process may become, imported once (the harness's is already)
        importlib.import_module(name)
    control = socket.socket(fileno=int(sys.argv[1]))
    first = control.recv(forking.MAX_MESSAGE)
    problem = _try_once(json.loads(first)["probe"]) if first else "the bot sent nothing"
    control.send(json.dumps({"ready": not problem, "problem": problem}).encode())
    if problem:
        return
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up byte is written
    statuses: dict[int, int] = {}  # a child's pid -> the pipe its status goes to
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, "control")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    while True:
        for key, _ in selector.select():
            if key.data == "child":
                os.read(wake_r, 4096)
                _reap(statuses)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(control, forking.MAX_MESSAGE, forking.MAX_FDS)
            except OSError:
                message, fds = b"", []
            if not message:  # the bot closed the socket, or it is gone: none of its workers may outlive this
                for pid in statuses:
                    _kill_group(pid)
                return
            _start(control, json.loads(message), fds, statuses, (selector, wake_r, wake_w))


def _start(control: socket.socket, request: dict[str, Any], fds: list[int], statuses: dict[int, int],
           own: tuple[selectors.BaseSelector, int, int]) -> None:
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(status_r)
        os.close(status_w)
        _child(request, fds, control, own)
    for fd in fds:
        os.close(fd)
    statuses[pid] = status_w
    socket.send_fds(control, [json.dumps({"pid": pid}).encode()], [status_r])
    os.close(status_r)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the worker's sandbox: its outer process leads the group (setsid)
    except OSError:
        pass


def _reap(statuses: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = statuses.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, forking.encode_status(status))
            except OSError:
                pass
            os.close(fd)


def _child(request: dict[str, Any], fds: list[int], control: socket.socket,
           own: tuple[selectors.BaseSelector, int, int]) -> None:
    """The forked child: its pipes in place, everything else of this process's closed, into the sandbox, then
    the worker. Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if request["entry"] not in forking.ENTRIES:
            raise own_sandbox.SandboxError(f"no worker {request['entry']!r} here")
        own_sandbox.dies_with_parent()
        selector, wake_r, wake_w = own  # this process's own: closed as objects, so nothing closes them again later
        selector.close()
        control.close()
        os.close(wake_r)
        os.close(wake_w)
        # Above every number they go to first, so that placing one never closes another still to be placed.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]
        for target, fd in zip(forking.CHILD_FDS, high):  # stdin, stdout and stderr, the channel(s)
            os.dup2(fd, target, inheritable=True)
        os.closerange(forking.CHILD_FDS[len(fds) - 1] + 1, os.sysconf("SC_OPEN_MAX"))
        own_sandbox.enter(request["bwrap"])
    except BaseException as exc:  # noqa: BLE001 - nothing of this process may run on in the child
        own_sandbox.give_up(exc)
    _become_worker(request)
    os._exit(0)  # pragma: no cover - the worker's main ends the process itself


def _become_worker(request: dict[str, Any]) -> None:
    """The worker's main, as a fresh interpreter would run it. It ends the process itself; where the worker's code
    exits first (sys.exit, an uncaught error), that propagates out of this process's main and the interpreter
    exits as a fresh worker's would: its exit code, its atexit handlers, its non-daemon threads joined."""
    os.environ.clear()
    os.environ.update(request["env"])
    sys.pycache_prefix = os.environ.get("PYTHONPYCACHEPREFIX") or None
    tempfile.tempdir = None  # read TMPDIR again
    sys.argv = ["-c", *request["argv"]]
    worker = sys.modules[request["entry"]]  # one of ENTRIES (checked in _child), imported by main before any request
    if worker is entry:
        entry.forked()
    worker.main(request["argv"])


def _try_once(args: list[str]) -> str:
    """One sandbox of `args` made and ended before any worker's: '' where it worked, else why not (one line)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.dup2(write, 2)
        try:
            own_sandbox.enter(args)
            os._exit(0 if not os.path.exists("/oldroot") else 3)
        except BaseException as exc:  # noqa: BLE001 - nothing of this process may run on in the child
            own_sandbox.give_up(exc)
    os.close(write)
    with os.fdopen(read, "rb") as said:
        text = said.read(4096).decode(errors="replace").strip()
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return ""
    return (text.splitlines() or [f"the forkserver's own sandbox did not start (wait status {status})"])[-1]
