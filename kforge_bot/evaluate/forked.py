"""Workers forked from a process that imported torch once (evaluate.worker.forkserver), in place of a fresh
interpreter started by bubblewrap: the same sandbox, without a second of a core spent importing torch again.

One forkserver per workers' environment (as it is before a worker's view adds its HOME, TMPDIR and caches: the
environment torch was imported in), started on the first sandboxed worker that may use one and kept for the
bot's life; its socket's end is its end. Used only where bubblewrap itself works (the view is bwrap's argument
list, read by the forkserver's child), for the harness's and a workload's workers (wire.forking.ENTRIES), on the
CPU (on a GPU it is not yet measured: KFORGE_FORKSERVER=1 asks for it there). Not with a `KFORGE_BWRAP` of the
caller's choosing (a wrapper that logs or refuses starts: that is what runs) unless KFORGE_FORKSERVER=1 asks, nor
with KFORGE_FORKSERVER=0. A
forkserver whose own probe sandbox fails says why once, and workers start with bubblewrap.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.wire import forking

ENTRY = forking.ENTRIES[0]  # the harness's worker
START_TIMEOUT_S = 120.0  # the forkserver imports torch before it answers its first message


def usable(entry_module: str, view: isolation.View | None, warm: str | None) -> bool:
    """Whether a worker of `entry_module` with `view` may be forked rather than started afresh."""
    wanted = os.environ.get("KFORGE_FORKSERVER", "")
    if view is None or entry_module not in forking.ENTRIES or wanted == "0" or not sys.platform.startswith("linux"):
        return False
    if wanted == "1":  # asked for: on a GPU too, and beside a carried bwrap (the device image's)
        return True
    on_cpu = view.devices == "cpu" and not (warm or "").startswith(("cuda", "xpu"))
    return on_cpu and not os.environ.get("KFORGE_BWRAP")


class ForkedProcess:
    """A forked worker, as much of `subprocess.Popen` as the bot uses: `pid` (its process group's leader, which
    holds the whole sandbox), `stdin`, `poll`, `wait` and `returncode`."""

    def __init__(self, pid: int, stdin: IO[bytes], status_fd: int, server: Forkserver) -> None:
        self.pid, self.stdin, self.returncode = pid, stdin, None
        self._status_fd: int | None = status_fd
        self._server: Forkserver | None = server

    def poll(self) -> int | None:
        return self.wait(0.0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        assert self._status_fd is not None
        ready, _, _ = select.select([self._status_fd], [], [], timeout)
        if not ready:
            if timeout == 0.0:
                return None
            raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout or 0.0)
        data = os.read(self._status_fd, 64)
        os.close(self._status_fd)
        self._status_fd = None
        # No status: the forkserver itself ended, and its children with it (their PDEATHSIG, SIGKILL).
        code = forking.decode_status(data)
        self.returncode = -9 if code is None else code
        if self._server is not None:
            self._server.ended()
            self._server = None
        return self.returncode

    def __del__(self) -> None:
        if self._status_fd is not None:
            os.close(self._status_fd)


class Forkserver:
    """The bot's end of one forkserver."""

    def __init__(self, env: dict[str, str], bytecode: Path | None) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(env)
        # Its imports read the workers' bytecode cache (never write one into the installation).
        env.pop("PYTHONPYCACHEPREFIX", None)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if bytecode is not None:
            env["PYTHONPYCACHEPREFIX"] = str(bytecode)
        env["HOME"] = "/nonexistent"  # it reads and writes no user files
        env.pop("TMPDIR", None)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "import sys; from kforge_bot.evaluate.worker.forkserver import main; main()",
                 str(theirs.fileno())], pass_fds=(theirs.fileno(),), env=env, cwd="/",
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        finally:
            theirs.close()
        self.socket = mine
        self.lock = threading.Lock()
        self.live = 0  # its workers not yet seen to end
        self.problem = self._probe()

    def ended(self) -> None:
        with self.lock:
            self.live -= 1

    def close(self) -> None:
        """End it (it kills whatever of its workers still runs, as when the bot ends)."""
        self.socket.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def _probe(self) -> str:
        with tempfile.TemporaryDirectory(prefix="kforge-forkserver-probe-") as scratch:
            args = isolation.command(["true"], isolation.View(scratch=Path(scratch)))
            try:
                self.socket.send(json.dumps({"probe": args}).encode())
                self.socket.settimeout(START_TIMEOUT_S)
                answer = json.loads(self.socket.recv(forking.MAX_MESSAGE) or b"{}")
            except (OSError, ValueError) as exc:
                return f"the forkserver did not answer ({exc})"
            finally:
                self.socket.settimeout(None)
        return "" if answer.get("ready") else str(answer.get("problem") or "the forkserver did not start")

    def fork(self, entry: str, bwrap: list[str], env: dict[str, str], argv: list[str],
             fds: list[int]) -> tuple[int, int]:
        """(the worker's pid, its status pipe's read end); raises OSError where the forkserver is gone."""
        message = json.dumps({"entry": entry, "bwrap": bwrap, "env": env, "argv": argv}).encode()
        with self.lock:
            socket.send_fds(self.socket, [message], fds)
            self.socket.settimeout(START_TIMEOUT_S)
            try:
                answer, received, _, _ = socket.recv_fds(self.socket, forking.MAX_MESSAGE, 1)
            finally:
                self.socket.settimeout(None)
            self.live += 1 if answer and len(received) == 1 else 0
        if not answer or len(received) != 1:
            for fd in received:
                os.close(fd)
            raise OSError("the forkserver ended")
        return int(json.loads(answer)["pid"]), received[0]


# Each forkserver holds torch (about 220 MB resident on the CPU): a bot whose workers' environments change (a test
# suite does) keeps this many, ending the least recently used of those with no worker running.
MAX_SERVERS = 3
_servers: dict[tuple[tuple[str, str], ...], Forkserver] = {}  # in order of use, the last used last
_servers_lock = threading.Lock()


def server_for(env: dict[str, str], bytecode: Path | None) -> Forkserver | None:
    """The forkserver for workers of environment `env` (before their views': isolation.environment), started on
    first use; None where it cannot sandbox."""
    key = tuple(sorted(env.items())) + (("", str(bytecode)),)
    with _servers_lock:
        server = _servers.pop(key, None)
        if server is not None and not server.problem and server.proc.poll() is not None:
            server = None  # ended (a slot's orphan sweep kills it with the workers it marks): start another
        if server is None:
            idle = [k for k, s in _servers.items() if s.live <= 0 or s.problem or s.proc.poll() is not None]
            for old in idle[:max(0, len(_servers) + 1 - MAX_SERVERS)]:
                _servers.pop(old).close()
            server = Forkserver(env, bytecode)
            if server.problem:
                print(f"kforge-bot: workers start with bubblewrap: {server.problem}", file=sys.stderr)
        _servers[key] = server
        if server.problem or server.proc.poll() is not None:
            return None
        return server


def close_all() -> None:
    """End every forkserver (a pool's slot closing): nothing of its evaluations stays running."""
    with _servers_lock:
        while _servers:
            _servers.popitem()[1].close()


def fork_worker(entry: str, argv_tail: list[str], base_env: dict[str, str], env: dict[str, str],
                bwrap: list[str], bytecode: Path | None, stdout_fd: int,
                channel_fds: tuple[int, ...]) -> ForkedProcess | None:
    """A worker forked into the sandbox `bwrap` (bubblewrap's command for its view: isolation.command) with `env`
    (`base_env` as its view made it: isolation.environment), its stdout and stderr to `stdout_fd`, its result
    channel (and outputs socket) at the numbers forking.channel_argument names; None where no forkserver can start
    it."""
    server = server_for(base_env, bytecode)
    if server is None:
        return None
    stdin_r, stdin_w = os.pipe()
    try:
        pid, status_fd = server.fork(entry, bwrap, env, argv_tail, [stdin_r, stdout_fd, stdout_fd, *channel_fds])
    except (OSError, ValueError, KeyError):
        os.close(stdin_w)
        return None
    finally:
        os.close(stdin_r)
    return ForkedProcess(pid, os.fdopen(stdin_w, "wb"), status_fd, server)
