"""What the parent reads back from a running worker (sandbox.WorkerProcess reads through it): its result channel
as messages, complete JSON lines that carry the worker's nonce, bounded per line and in total so that a flood ends
the worker within seconds and with bounded memory; and the tail of its stdout and stderr, drained in a thread of
its own. Nothing here starts, signals or ends a process.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Protocol

LOG_TAIL_BYTES = 16_000
MAX_LINE_BYTES = 8 << 20  # one message: timing samples and a profile digest take well under 1 MiB
MAX_CHANNEL_BYTES = 64 << 20  # everything a worker may send


class Received(Protocol):
    """What a worker's channel has brought so far (sandbox.WorkerOutcome is one)."""

    messages: list[dict[str, Any]]
    forged_lines: int  # lines on the channel without the nonce (a candidate writing to it)
    flooded: str  # why the channel was cut off (too long a line, too much in total)


class ChannelLines:
    """The worker's channel as messages: complete lines carrying the nonce; a line without it is counted as forged,
    and a channel past its limits ends (`outcome.flooded` says which)."""

    def __init__(self, nonce: str, outcome: Received) -> None:
        self.nonce, self.outcome = nonce, outcome
        self.buffer = b""
        self.received = 0

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        outcome = self.outcome
        self.received += len(chunk)
        self.buffer += chunk
        messages = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = _parse(line, self.nonce)
            if message is None:
                outcome.forged_lines += 1 if line.strip() else 0
                continue
            outcome.messages.append(message)
            messages.append(message)
        if self.received > MAX_CHANNEL_BYTES or len(self.buffer) > MAX_LINE_BYTES:
            outcome.flooded = (f"over {MAX_CHANNEL_BYTES >> 20} MiB in all" if self.received > MAX_CHANNEL_BYTES
                               else f"a line over {MAX_LINE_BYTES >> 20} MiB")
        return messages


def _parse(line: bytes, nonce: str) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(message, dict) or message.get("nonce") != nonce:
        return None
    return message


class LogTail:
    """Drains a worker's stdout and stderr in a thread, keeping only the last LOG_TAIL_BYTES: a candidate that
    prints without end costs this process a little CPU, never memory or disk."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._data = bytearray()
        self._thread = threading.Thread(target=self._drain, name="kforge-worker-log", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while True:
                chunk = os.read(self._fd, 1 << 16)
                if not chunk:
                    break
                self._data += chunk
                if len(self._data) > 2 * LOG_TAIL_BYTES:
                    del self._data[:-LOG_TAIL_BYTES]
        except OSError:
            pass
        finally:
            os.close(self._fd)

    def text(self) -> str:
        self._thread.join(timeout=2)  # the pipe closes when the process group is gone
        return bytes(self._data[-LOG_TAIL_BYTES:]).decode("utf-8", errors="replace")
