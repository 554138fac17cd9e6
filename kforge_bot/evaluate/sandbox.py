"""Running a worker in a child process that cannot take the bot down or see its secrets.

- A fresh interpreter in its own process group (session), killed as a group on timeout, so compilers,
  stray threads and grandchildren go with it.
- An environment stripped of tokens, keys, passwords and CI credentials.
- Results over a private pipe, as JSON lines carrying a nonce the child reads from stdin before any user
  code is imported; stdout and stderr are kept only as a log tail for the report.
- The request (seeds included) also arrives on stdin, never as a file: a candidate that could read the
  seeds, its own or a concurrent evaluation's, could precompute the expected results at import time.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|COOKIE|SESSION)",
                         re.IGNORECASE)
SECRET_PREFIXES = ("GITHUB_", "ACTIONS_", "OPENAI_", "ANTHROPIC_", "AWS_", "AZURE_", "GOOGLE_", "GH_", "HF_",
                   "HUGGING_FACE_", "RUNNER_", "KFORGE_LLM_", "SSH_")
LOG_TAIL_BYTES = 16_000


def scrubbed_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment minus anything that could be a credential."""
    source = dict(os.environ if environ is None else environ)
    clean = {k: v for k, v in source.items() if not SECRET_NAME.search(k) and not k.startswith(SECRET_PREFIXES)}
    clean["PYTHONUNBUFFERED"] = "1"
    clean["PYTHONDONTWRITEBYTECODE"] = "1"
    # The worker must import this kforge_bot even when it is not installed (tests, a checkout).
    package_root = str(Path(__file__).resolve().parents[2])
    clean["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, clean.get("PYTHONPATH", "")) if p)
    return clean


@dataclass
class ChildOutcome:
    messages: list[dict[str, Any]] = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    log_tail: str = ""
    forged_lines: int = 0  # lines on the channel without the nonce (a candidate writing to it)

    @property
    def result(self) -> dict[str, Any] | None:
        finals = [m for m in self.messages if m.get("type") == "result"]
        return finals[-1] if finals else None

    def exit_description(self) -> str:
        if self.timed_out:
            return f"timed out after {self.wall_s:.0f} s (hang, or too slow to finish)"
        if self.returncode is None:
            return "did not finish"
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"killed by {name}"
        return f"exited with status {self.returncode} before reporting a result"


class WorkerProcess:
    """A worker started ahead of its request. Until the request arrives on stdin it runs trusted code only
    (the interpreter, torch, the harness), so it can warm up while something else runs: the candidate's
    worker imports torch while the reference's worker computes the expected outputs, and gets the candidate
    only once those outputs are off the disk."""

    def __init__(self, workdir: Path, role: str, env: dict[str, str] | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"log_{role}.txt"
        self._read_fd, write_fd = os.pipe()
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "kforge_bot.evaluate.worker", str(write_fd)],
                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
                    env=scrubbed_environment() if env is None else env, cwd=str(workdir), start_new_session=True,
                )
        except BaseException:
            os.close(self._read_fd)
            raise
        finally:
            os.close(write_fd)
        self._done = False

    def run(self, request: dict[str, Any], timeout_s: float,
            on_message: Callable[[dict[str, Any]], None] | None = None) -> ChildOutcome:
        """Send `request`, collect the messages until the worker exits or `timeout_s` passes (counted from
        now), then kill its process group. Never raises for the child's failures; runs once."""
        assert not self._done, "a worker process runs one request"
        self._done = True
        proc, read_fd = self.proc, self._read_fd
        nonce = secrets.token_hex(16)
        outcome = ChildOutcome()
        started = time.monotonic()
        # A large request fills the pipe before the child reads it: write from a thread so the timeout holds.
        feeder = threading.Thread(target=_feed, args=(proc, (nonce + "\n" + json.dumps(request) + "\n").encode()),
                                  daemon=True)
        feeder.start()
        buffer = b""
        selector = selectors.DefaultSelector()
        selector.register(read_fd, selectors.EVENT_READ)
        eof = False
        try:
            while not eof:
                remaining = timeout_s - (time.monotonic() - started)
                if remaining <= 0:
                    outcome.timed_out = True
                    break
                for _key, _ in selector.select(timeout=min(remaining, 1.0)):
                    chunk = os.read(read_fd, 1 << 16)
                    if not chunk:
                        eof = True
                        break
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        message = _parse(line, nonce)
                        if message is None:
                            outcome.forged_lines += 1 if line.strip() else 0
                            continue
                        outcome.messages.append(message)
                        if on_message is not None:
                            on_message(message)
                if not eof and proc.poll() is not None and not selector.select(timeout=0):
                    # The child is gone but a grandchild may hold the pipe open: do not wait for it.
                    break
        finally:
            selector.close()
            outcome.returncode = self._end()
        outcome.wall_s = time.monotonic() - started
        outcome.log_tail = _tail(self.log_path)
        return outcome

    def discard(self) -> None:
        """Kill a worker that will not get its request (the reference failed, the evaluation was cut short)."""
        if not self._done:
            self._done = True
            self._end()

    def _end(self) -> int | None:
        os.close(self._read_fd)
        _kill_group(self.proc)
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None


def start_worker(workdir: Path, role: str, env: dict[str, str] | None = None) -> WorkerProcess:
    return WorkerProcess(workdir, role, env)


def run_worker(request: dict[str, Any], workdir: Path, timeout_s: float,
               on_message: Callable[[dict[str, Any]], None] | None = None,
               env: dict[str, str] | None = None) -> ChildOutcome:
    """Run `python -m kforge_bot.evaluate.worker` on `request`; never raises for the child's failures."""
    return start_worker(workdir, request["role"], env).run(request, timeout_s, on_message)


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass  # the child died first; its exit status tells the story


def _parse(line: bytes, nonce: str) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(message, dict) or message.get("nonce") != nonce:
        return None
    return message


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-LOG_TAIL_BYTES:].decode("utf-8", errors="replace")
