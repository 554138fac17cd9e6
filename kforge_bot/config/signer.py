"""The cache-signing key, held by a process of its own: the bot asks it for signatures and never holds the key.

The bot reads files a pull request names (kforge_bot.config.reader); a hole in that wall must not hand over the key
that makes a cache entry trusted. So, first thing in the CLI (`start`), before any such file is read:

- the key is taken from `$KFORGE_CACHE_SECRET` and wiped from this process: from `os.environ` and from the
  environment the process was started with (the bytes `/proc/self/environ` shows, which `os.environ.pop` leaves);
- a child is forked that holds it (or reads `~/.config/kforge-bot/cache-secret` itself, on its first request), marks
  itself not dumpable (its `/proc/<pid>/environ` and memory are then closed to processes of the same user) and answers
  one request at a time on a socket only the bot holds: bytes in, their HMAC-SHA256 out.

The bot's `mac` goes to that child; without one (kforge_bot used as a library, in tests) it signs in-process as
before. Workers never see the socket (it is not inherited across exec) nor the key.
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import os
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable

from kforge_bot.errors import KforgeError

ENV_CACHE_SECRET = "KFORGE_CACHE_SECRET"
_PR_SET_DUMPABLE = 4
_MAX_REQUEST = 64 << 20  # a cache record is small; a larger request is a bug, not a record


class Signer:
    """The bot's end of the signer: `mac(blob)` asks the child, one request at a time."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self._sock, self.pid = sock, pid
        self._lock = threading.Lock()

    def mac(self, blob: bytes) -> str:
        try:
            with self._lock:
                self._sock.sendall(struct.pack(">I", len(blob)) + blob)
                answer = _read_exactly(self._sock, 64)
        except OSError:
            answer = b""
        if len(answer) != 64:  # the child was killed (or a bug): one line, never a silent miss
            raise KforgeError(f"the cache signer (process {self.pid}) has ended: nothing can be signed or verified",
                              hint="run the command again; --no-cache runs without the cache")
        return answer.decode("ascii")


_current: list[Signer] = []


def wipe_from_exec_environment(name: str) -> None:
    """Overwrite `name`'s value where the process's starting environment holds it (what `/proc/self/environ` reads),
    then drop it from os.environ. Where libc's `environ` cannot be reached, only os.environ is changed."""
    prefix = name.encode() + b"="
    try:
        table = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), "environ")
        i = 0
        while table[i]:
            text = ctypes.string_at(table[i])
            if text.startswith(prefix):
                ctypes.memset(table[i] + len(prefix), ord("x"), len(text) - len(prefix))
            i += 1
    except (OSError, ValueError, AttributeError):
        pass  # no libc environ to reach (not Linux or macOS): os.environ alone
    os.environ.pop(name, None)


def start(load_file_key: Callable[[], bytes]) -> Signer | None:
    """Take the key out of this process and start the child that holds it (once per process; POSIX only). The key
    is `$KFORGE_CACHE_SECRET`, else `load_file_key()`, called in the child on its first request."""
    if _current or not hasattr(os, "fork"):
        return _current[0] if _current else None
    given = os.environ.get(ENV_CACHE_SECRET)
    key = given.encode("utf-8") if given else None
    wipe_from_exec_environment(ENV_CACHE_SECRET)
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the signer
        ours.close()
        _serve(theirs, key, load_file_key)
    theirs.close()
    del key, given
    _current.append(Signer(ours, pid))
    return _current[0]


def mac(blob: bytes, load_key: Callable[[], bytes]) -> str:
    """This machine's HMAC-SHA256 of `blob`: the signer's where one was started, else computed here with
    `load_key()` (a library caller's process, which reads the key itself)."""
    if _current:
        return _current[0].mac(blob)
    return hmac.new(load_key(), blob, hashlib.sha256).hexdigest()


def _serve(sock: socket.socket, key: bytes | None, load_file_key: Callable[[], bytes]) -> None:
    """The child: not dumpable, deaf to the terminal's signals (the bot's end closing ends it), a MAC per request."""
    code = 0
    try:
        _not_dumpable()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for fd in (0, 1):  # it reads and prints nothing; stderr stays for a failure's one line
            os.close(fd)
        while True:
            header = _read_exactly(sock, 4)
            if len(header) < 4:
                break  # the bot ended
            (size,) = struct.unpack(">I", header)
            blob = _read_exactly(sock, size) if size <= _MAX_REQUEST else b""
            if len(blob) != size:
                break
            if key is None:
                key = load_file_key()
            sock.sendall(hmac.new(key, blob, hashlib.sha256).hexdigest().encode("ascii"))
    except BaseException as exc:  # noqa: BLE001 - the child must end here, never return into the bot's code
        print(f"kforge-bot: the cache signer stopped: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        os._exit(code)


def _not_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): /proc/<pid>/environ, mem and the like become root's; no core dump holds the key."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    parts, got = [], 0
    while got < size:
        chunk = sock.recv(min(size - got, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)
