"""Running a worker in a child process that cannot take the bot down or see its secrets.

- A fresh interpreter inside the OS sandbox (kforge_bot.evaluate.isolation: bubblewrap namespaces, a
  read-only system, one writable scratch directory) where the machine has it, in its own process group
  (session), killed as a group on timeout, so compilers, stray threads and grandchildren go with it.
- An environment stripped of tokens, keys, passwords and CI credentials.
- Results over a private pipe, as JSON lines carrying a nonce the child reads from stdin before any user
  code is imported; the channel is bounded (per line and in total), so a flood ends the worker within
  seconds and with bounded memory. stdout and stderr go through a pipe too, of which only a tail is kept
  (both read by kforge_bot.evaluate.channel_reader).
  On a GPU, outputs may come back as shared device memory over a socket of their own (evaluate.wire.outputs).
- The request (seeds included) also arrives on stdin, never as a file: a candidate that could read the
  seeds, its own or a concurrent evaluation's, could precompute the expected results at import time.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kforge_bot.environment import scrubbed_environment
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate import bytecode, forked, isolation
from kforge_bot.evaluate.channel_reader import ChannelLines, LogTail
from kforge_bot.evaluate.wire import forking, limits, outputs
from kforge_bot.evaluate.wire.activity import BuildWatch
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec
from kforge_bot.targets import target_kind

SCRATCH_CHECK_S = 0.5  # how often a running worker's scratch folder is measured against its limit
STALL_FACTOR = 50.0  # once built, a candidate silent for this many times the reference's slowest case is hung


@dataclass
class WorkerOutcome:
    """What one worker process ended with (`run_worker`): its messages, how it exited, and what the sandbox saw."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    log_tail: str = ""
    forged_lines: int = 0  # lines on the channel without the nonce (a candidate writing to it)
    flooded: str = ""  # why the channel was cut off (too long a line, too much in total)
    sandboxed: bool = False
    built: bool = False  # the worker said it had imported and built what it runs (phase "imported")
    stalled_s: float | None = None  # killed after this long without a message once built
    # Killed inside a first call that had stopped looking like a build (evaluate.wire.activity): its CPU seconds since.
    quiet_build_cpu_s: float | None = None
    shared: outputs.SharedOutputs | None = None  # outputs handed over as device memory; the caller closes it
    overfilled: int | None = None  # stopped with its scratch folder over this many bytes (evaluate.wire.limits)

    @property
    def sandbox_failure(self) -> str | None:
        """bwrap's own complaint when the sandbox never started (the worker said nothing): the bot's problem,
        never the candidate's or the reference's."""
        if not self.sandboxed or self.messages:
            return None
        first = next((ln for ln in self.log_tail.splitlines() if ln.strip()), "")
        return first if first.startswith(("bwrap: ", "kforge-sandbox: ")) else None

    @property
    def result(self) -> dict[str, Any] | None:
        finals = [m for m in self.messages if m.get("type") == "result"]
        return finals[-1] if finals else None

    def exit_description(self) -> str:
        if self.flooded:
            return f"flooded the result channel ({self.flooded}) and was stopped"
        if self.overfilled is not None:
            return (f"wrote more than {_size(self.overfilled)} into its scratch folder (the limit) and was stopped; "
                    "raise the policy's evaluation.scratch_limit_gb if the kernel needs that much")
        if self.stalled_s is not None and self.quiet_build_cpu_s is not None:
            return (f"hung in a first call: no compiler ran and it read or wrote no files for {self.stalled_s:.0f} s "
                    f"(the no-progress limit; {self.quiet_build_cpu_s:.0f} s of CPU meanwhile), so not a build")
        if self.stalled_s is not None:
            return (f"made no progress for {self.stalled_s:.0f} s once built (a call ran over {STALL_FACTOR:g}x the "
                    "reference's slowest case, at least the no-progress floor): a hang, or too slow to judge")
        if self.timed_out:
            where = "" if self.built else " while importing or compiling"
            return f"timed out after {self.wall_s:.0f} s{where} (hang, or too slow to finish)"
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

    entry_module = "kforge_bot.evaluate.worker.entry"  # whose main() the child runs (workloads run their own)

    def __init__(self, workdir: Path, role: str, env: dict[str, str] | None = None,
                 view: isolation.View | None = None, warm: str | None = None, hold_device: bool = False) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        env = dict(scrubbed_environment() if env is None else env)
        # OpenMP's threads wait for the next parallel region by spinning (for up to 200 ms in GNU's and Intel's
        # runtimes). With the base and the head in workers of their own, the side not being timed would spin on
        # the cores the timed side runs on: every sample "crowded", the interval biased. Waiting threads sleep.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        # Not `-m`: the worker module would be __main__, reachable from user code under that name.
        argv = [sys.executable, "-c", f"import sys; from {self.entry_module} import main; main(sys.argv[1:])"]
        self.sandboxed = view is not None
        base_env = env  # as torch is imported in (a forkserver's, evaluate.forked), before the view's own folders
        if view is not None:
            env = isolation.environment(env, view)
            argv = isolation.command(argv, view)
        self._read_fd, write_fd = os.pipe()
        log_read, log_write = os.pipe()
        # On a GPU, outputs may come back as shared device memory over a socket of their own (evaluate.wire.outputs).
        self.shared: outputs.SharedOutputs | None = None
        theirs: socket.socket | None = None
        if warm is not None and warm.startswith("cuda") and os.environ.get("KFORGE_OUTPUTS", "device") != "files":
            mine, theirs = outputs.channel()
            self.shared = outputs.SharedOutputs(mine, warm)
        channel_arg = str(write_fd) if theirs is None else f"{write_fd}:{theirs.fileno()}"
        passed = (write_fd,) if theirs is None else (write_fd, theirs.fileno())
        # The host's monotonic clock, which the worker shares (no time namespace): its boot is read against these.
        self.spawned_at = time.monotonic()
        self.request_sent_at: float | None = None
        try:
            self.proc: subprocess.Popen[bytes] | forked.ForkedProcess | None = None
            if view is not None and forked.usable(self.entry_module, view, warm):
                arguments = [forking.channel_argument(theirs is not None), *self._warm_args(role, warm, hold_device)]
                self.proc = forked.fork_worker(self.entry_module, arguments, base_env, env, argv, view.bytecode,
                                               log_write, passed)
            if self.proc is None:
                self.proc = subprocess.Popen(
                    [*argv, channel_arg, *self._warm_args(role, warm, hold_device)], stdin=subprocess.PIPE,
                    stdout=log_write, stderr=subprocess.STDOUT,
                    pass_fds=passed, env=env, cwd=str(workdir), start_new_session=True,
                )
        except BaseException:
            os.close(self._read_fd)
            os.close(log_read)
            if self.shared is not None:
                self.shared.close()
            raise
        finally:
            os.close(write_fd)
            os.close(log_write)
            if theirs is not None:
                theirs.close()
        self._log = LogTail(log_read)
        self._done = False
        self._nonce: str | None = None
        self._feeder: threading.Thread | None = None
        self._holding = bool(warm) and hold_device
        self.workdir = workdir
        # Set while the worker has answered the parent and waits for its next request (evaluate.pair_driver): its
        # silence then is the parent's doing, not a hang, and does not count towards `run`'s no-progress limit.
        self.waiting_on_parent = False

    @staticmethod
    def _warm_args(role: str, warm: str | None, hold_device: bool) -> list[str]:
        # The device to initialise before the request comes (worker.entry.warm_up); a candidate's worker also warms
        # the profiler, which it will use. "hold": not before `release_device()` (a timed run is under way).
        if not warm:
            return []
        return [warm, "profiler" if role == "candidate" else "device", *(["hold"] if hold_device else [])]

    def release_device(self) -> None:
        """Let a worker started with `hold_device` warm up its device (once; the request does it too)."""
        if self._holding:
            self._holding = False
            self._write(b"go\n", close=False)

    def send(self, request: dict[str, Any], more: bool = False) -> None:
        """Send the request (with the nonce its messages must carry). `more`: one more line follows
        (`send_last`), which the worker waits for before it runs any user code's call."""
        assert self._nonce is None, "a worker process gets one request"
        self.release_device()
        self._nonce = secrets.token_hex(16)
        if self.shared is not None:
            self.shared.expect(self._nonce)
        self.request_sent_at = time.monotonic()
        self._write((self._nonce + "\n" + json.dumps(request) + "\n").encode(), close=not more)

    def boot_phases(self, clocks: Any) -> dict[str, float]:
        """Where the worker's start went, from the clocks it reported (`worker.entry.BOOT`): its interpreter and
        imports, its device warm-up, and how long the request then waited for it (or it for the request)."""
        if not isinstance(clocks, dict) or self.request_sent_at is None:
            return {}
        try:
            imported, ready = float(clocks["imported_at"]), float(clocks["ready_at"])
            released = float(clocks.get("released_at", imported))  # a held spare waited for its go until then
        except (KeyError, TypeError, ValueError):
            return {}
        phases = {"boot_s": round(imported - self.spawned_at, 3), "warm_up_s": round(ready - released, 3),
                  "request_waited_for_worker_s": round(max(0.0, ready - self.request_sent_at), 3),
                  "worker_waited_for_request_s": round(max(0.0, self.request_sent_at - ready), 3)}
        if "released_at" in clocks:
            phases["held_off_device_s"] = round(released - imported, 3)
        if clocks.get("forked"):
            phases["forked"] = True  # from the forkserver (evaluate.forked): it imported nothing itself
        try:  # the boot's parts: sandbox and interpreter, torch's import, the harness's modules
            began, torch_at = float(clocks["began_at"]), float(clocks["torch_at"])
            phases.update(interpreter_s=round(began - self.spawned_at, 3), torch_import_s=round(torch_at - began, 3),
                          harness_import_s=round(imported - torch_at, 3))
        except (KeyError, TypeError, ValueError):
            pass
        return phases

    def send_last(self, line: dict[str, Any]) -> None:
        self._write((json.dumps(line) + "\n").encode(), close=True)

    def command(self, line: dict[str, Any]) -> None:
        """One more control line, stdin left open for the next (a timed pair's requests: evaluate.pair_driver).
        Written here once the request is through: a request a sample costs no thread."""
        data = (json.dumps(line) + "\n").encode()
        if self._feeder is not None and self._feeder.is_alive():
            self._write(data, close=False)
        else:
            _feed(self.proc, data, False, None)

    def _write(self, data: bytes, close: bool) -> None:
        # A large request fills the pipe before the child reads it: write from a thread so the timeout holds.
        previous = self._feeder
        self._feeder = threading.Thread(target=_feed, args=(self.proc, data, close, previous), daemon=True)
        self._feeder.start()

    def run(self, request: dict[str, Any] | None, timeout_s: float,
            on_message: Callable[[dict[str, Any]], None] | None = None,
            stall_s: float | None = None, scratch_limit: int | None = None) -> WorkerOutcome:
        """Send `request` (None: sent already, with `send`), collect the messages until the worker exits or
        `timeout_s` passes (counted from now), then kill its process group. Once the worker says it is built,
        `stall_s` without a message also ends it (a hang costs that, not the whole timeout); inside a first call on
        a shape set, which may build (candidate_role.CandidateRun.first_call), `stall_s` without a message and
        without a sign of a build (a compiler process, files read or written: evaluate.wire.activity); a scratch folder
        over `scratch_limit` bytes (looked at every SCRATCH_CHECK_S, and once more at the end) ends it too. Never raises
        for the child's failures; runs once."""
        assert not self._done, "a worker process runs one request"
        if request is not None:
            self.send(request)
        assert self._nonce is not None, "send the request first"
        self._done = True
        proc, read_fd = self.proc, self._read_fd
        outcome = WorkerOutcome(sandboxed=self.sandboxed, shared=self.shared)
        started = time.monotonic()
        lines = ChannelLines(self._nonce, outcome)
        liveness = _Liveness(self, started, timeout_s, stall_s, scratch_limit)
        selector = selectors.DefaultSelector()
        selector.register(read_fd, selectors.EVENT_READ)
        eof = False
        try:
            while not eof and not liveness.ended(time.monotonic(), outcome):
                for _key, _ in selector.select(timeout=liveness.wait_s(time.monotonic())):
                    chunk = os.read(read_fd, 1 << 16)
                    if not chunk:
                        eof = True
                        break
                    for message in lines.feed(chunk):
                        liveness.heard(message, outcome)
                        if on_message is not None:
                            on_message(message)
                    if outcome.flooded:
                        eof = True
                        break
                if not eof and proc.poll() is not None and not selector.select(timeout=0):
                    # The child is gone but a grandchild may hold the pipe open: do not wait for it.
                    break
        finally:
            selector.close()
            outcome.returncode = self._end(exited=eof and not outcome.flooded)
            if scratch_limit is not None and outcome.overfilled is None and self._overfilled(scratch_limit):
                outcome.overfilled = scratch_limit  # filled in the last moments: its result is not believed
            if self.sandboxed and outcome.returncode is not None and 128 < outcome.returncode <= 128 + 64:
                outcome.returncode = 128 - outcome.returncode  # bwrap reports a child's fatal signal N as 128+N
        outcome.wall_s = time.monotonic() - started
        outcome.log_tail = self._log.text()
        phases = (outcome.result or {}).get("phases")
        if isinstance(phases, dict) and "boot" in phases:
            phases["boot"] = self.boot_phases(phases["boot"])
        return outcome

    def _overfilled(self, limit: int) -> bool:
        return limits.folder_bytes(str(self.workdir), limit) > limit

    def discard(self) -> None:
        """Kill a worker that will not get its request (the reference failed, the evaluation was cut short)."""
        if not self._done:
            self._done = True
            self._end()
            if self.shared is not None:
                self.shared.close()

    def _end(self, exited: bool = False) -> int | None:
        os.close(self._read_fd)
        if exited:
            # The worker closed its channel: let it (and bwrap around it) finish, so its own exit status (a
            # segfault, say) is what we report rather than the kill below.
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        kill_group(self.proc)
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None


# Where every evaluation's workers start (the reference's, each side's, a spare, an import check). Tests of the bot's
# own side (decisions, reports, caches, commands) put a scripted stand-in here (tests/fakes/workers.py), so they start
# no torch process; nothing in the package sets it.
Starter = Callable[[Path, str, "dict[str, str] | None", "isolation.View | None", "str | None", bool], Any]
starter: Starter | None = None


def start_worker(workdir: Path, role: str, env: dict[str, str] | None = None,
                 view: isolation.View | None = None, warm: str | None = None,
                 hold_device: bool = False) -> WorkerProcess:
    if starter is not None:
        return starter(workdir, role, env, view, warm, hold_device)  # type: ignore[no-any-return]
    return WorkerProcess(workdir, role, env, view, warm, hold_device)


def run_worker(request: dict[str, Any], workdir: Path, timeout_s: float,
               on_message: Callable[[dict[str, Any]], None] | None = None,
               env: dict[str, str] | None = None, view: isolation.View | None = None) -> WorkerOutcome:
    """Run the worker on `request`; never raises for the child's failures."""
    scratch_limit = (request.get("limits") or {}).get("scratch_bytes")
    return start_worker(workdir, request["role"], env, view, warm=request.get("target")).run(
        request, timeout_s, on_message, scratch_limit=scratch_limit)


def _size(n: int) -> str:
    return f"{n / (1 << 30):.3g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.3g} MiB"


def _feed(proc: subprocess.Popen[bytes], data: bytes, close: bool, previous: threading.Thread | None) -> None:
    if previous is not None:
        previous.join()  # lines arrive in the order they were sent
    try:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.flush()
        if close:
            proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass  # the child died first; its exit status tells the story


class _Liveness:
    """When a running worker is ended: its whole time spent, its scratch folder over the limit, or silent for
    `stall_s` once built (the parent's own waits excepted); inside a first call on a shape set, silent and with no
    sign of a build (evaluate.wire.activity) for as long."""

    def __init__(self, worker: WorkerProcess, started: float, timeout_s: float, stall_s: float | None,
                 scratch_limit: int | None) -> None:
        self.worker, self.started, self.timeout_s = worker, started, timeout_s
        self.stall_s, self.scratch_limit = stall_s, scratch_limit
        self.last_message = started
        self.next_scratch_check = started + SCRATCH_CHECK_S
        self.building = False  # inside a side's first call on a shape set: build time while it looks like one
        self.watch: BuildWatch | None = None
        self.next_look = started

    def wait_s(self, now: float) -> float:
        return max(min(self.timeout_s - (now - self.started), SCRATCH_CHECK_S), 0.0)

    def heard(self, message: dict[str, Any], outcome: WorkerOutcome) -> None:
        self.last_message = time.monotonic()
        outcome.built = outcome.built or message.get("phase") == "imported"
        self.building = message.get("phase") == "first_call"
        self.watch = None  # a new first call: its build is watched from its own start

    def ended(self, now: float, outcome: WorkerOutcome) -> bool:
        """Whether the worker is to be ended now (and why, in `outcome`)."""
        if self.timeout_s - (now - self.started) <= 0:
            outcome.timed_out = True
            return True
        if self.scratch_limit is not None and now >= self.next_scratch_check:
            self.next_scratch_check = now + SCRATCH_CHECK_S
            if self.worker._overfilled(self.scratch_limit):
                outcome.overfilled = self.scratch_limit
                return True
        if self.worker.waiting_on_parent:
            self.last_message = now
        stall_s = self.stall_s
        if stall_s is not None and outcome.built and not self.building and now - self.last_message > stall_s:
            outcome.timed_out, outcome.stalled_s = True, stall_s
            return True
        if stall_s is not None and self.building and now >= self.next_look:
            self.next_look = now + SCRATCH_CHECK_S
            self.watch = self.watch or BuildWatch(self.worker.proc.pid, self.last_message)
            self.watch.look(now)
            if now - max(self.last_message, self.watch.last_active) > stall_s:
                outcome.timed_out, outcome.stalled_s = True, stall_s
                outcome.quiet_build_cpu_s = self.watch.cpu_s
                return True
        return False


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group `proc` leads (started with start_new_session): what it started goes with it. A
    group already gone, or one that is not this user's to signal, is no error."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------------- an evaluation's workers


def sandbox_view(spec: KernelSpec, implementations: list[Implementation | None], target: str,
                 scratch: Path, settings: EvalSettings) -> isolation.View | None:
    """What a worker on `target` may see, or None where the policy lets it run unsandboxed (`required` raises
    when the machine cannot sandbox). Readable: the kernel's source folders; writable: its scratch alone."""
    if not isolation.resolve_isolation(settings.isolation):
        return None
    implementations = [spec.reference, spec.inputs_source, *implementations]
    roots = {Path(spec.root)} | {Path(i.root) for i in implementations if i is not None and i.root} \
        | {Path(p) for i in implementations if i is not None for p in i.paths}
    extensions = os.environ.get("KFORGE_EXTENSIONS_ROOT")  # compile-ahead builds: read-only, copied when used
    readable = roots | ({Path(extensions)} if extensions else set()) | python_path_folders()
    return isolation.View(scratch=scratch, readable=tuple(sorted(readable)), devices=target_kind(target),
                          bytecode=bytecode.for_workers(scrubbed_environment()).directory)


def python_path_folders(environ: dict[str, str] | None = None) -> set[Path]:
    """The bot's own PYTHONPATH folders (a package installed there), shown read-only to workers as the Python
    installation's packages are: a kernel that imports in the bot imports in its worker too. Only the bot's
    environment decides them, never a manifest."""
    value = (os.environ if environ is None else environ).get("PYTHONPATH", "")
    return {Path(p).resolve() for p in value.split(os.pathsep) if p and os.path.isabs(p) and os.path.isdir(p)}


def raise_on_sandbox_failure(outcome: WorkerOutcome) -> None:
    failure = outcome.sandbox_failure
    if failure:
        raise KforgeError(f"the sandbox could not start a worker: {failure}",
                          hint="run `kforge-bot doctor` to see what the sandbox needs here, or set policy "
                               "isolation: off on a machine you trust")
