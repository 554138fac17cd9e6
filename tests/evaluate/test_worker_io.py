"""The worker's ways in and out (evaluate.worker.worker_io): the result channel, the error texts, the output sink's
switch to the host, and the control lines read from the stdin the worker started with."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kforge_bot.evaluate.wire import outputs
from kforge_bot.evaluate.worker import worker_io
from kforge_bot.evaluate.worker.worker_io import Channel, Stop, is_compile_error, short_error


def test_a_message_is_one_json_line_with_the_nonce_however_the_pipe_splits_it(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    real_write = os.write
    monkeypatch.setattr(worker_io, "_write", lambda fd, data: real_write(fd, data[:5]))  # a short write each time
    try:
        Channel(write_end, "n0nce").send("progress", phase="timing", pairs=3, path=Path("/x"))
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            lines = pipe.read().decode().splitlines()
    finally:
        monkeypatch.undo()
    assert len(lines) == 1
    assert json.loads(lines[0]) == {"nonce": "n0nce", "type": "progress", "phase": "timing", "pairs": 3, "path": "/x"}


def test_a_stop_carries_its_verdict() -> None:
    stop = Stop("rejected", "the candidate replaced torch.equal", "traceback")
    assert (stop.status, stop.reason, stop.detail, str(stop)) == ("rejected", "the candidate replaced torch.equal",
                                                                 "traceback", "the candidate replaced torch.equal")


def test_a_long_compiler_error_is_cut_to_the_lines_that_say_what_went_wrong() -> None:
    log = "\n".join([f"building step {i}" for i in range(50)] + ["kernel.cu(3): error: identifier x is undefined",
                                                                  "ninja: build stopped: subcommand failed."])
    text = short_error(RuntimeError(f"Error building extension 'k':\n{log}"))
    assert text == ("RuntimeError: Error building extension 'k': | kernel.cu(3): error: identifier x is undefined")
    assert short_error(ValueError("bad shape")) == "ValueError: bad shape"


@pytest.mark.parametrize(("exc", "compile_error"), [
    (SyntaxError("invalid syntax"), True),
    (ModuleNotFoundError("No module named 'triton'"), True),
    (RuntimeError("Error building extension 'softmax_ext'"), True),
    (RuntimeError("ninja: build stopped: subcommand failed."), True),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), False),
    (ValueError("failed"), False),
])
def test_what_counts_as_a_compile_error(exc: BaseException, compile_error: bool) -> None:
    assert is_compile_error(exc) is compile_error


def test_the_memory_budget_sends_device_outputs_through_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sink = outputs.DeviceSink(theirs, "n", 0)
        sink.unavailable = None  # as on a GPU whose driver exports memory
        monkeypatch.setattr(worker_io, "_SINK", sink)
        assert worker_io.device_outputs()
        worker_io.keep_outputs_on_device(True)
        assert worker_io.device_outputs()
        worker_io.keep_outputs_on_device(False)
        assert not worker_io.device_outputs()
        assert sink.unavailable == "the memory budget keeps outputs in host memory"
        monkeypatch.setattr(worker_io, "_SINK", outputs.FileSink())
        worker_io.keep_outputs_on_device(False)  # files already: nothing to switch
        assert not worker_io.device_outputs()
    finally:
        mine.close()
        theirs.close()


def test_control_lines_come_from_the_stdin_the_worker_started_with() -> None:
    """A candidate that replaces sys.stdin cannot feed the harness its Fit."""
    program = textwrap.dedent("""
        import io, sys
        from kforge_bot.evaluate.worker import worker_io
        sys.stdin = io.StringIO("forged\\n")
        print(worker_io.read_control_line().strip())
        worker_io.close_stdin()
        print(sys.__stdin__.closed)
    """)
    out = subprocess.run([sys.executable, "-c", program], input="from the parent\n", capture_output=True, text=True,
                         check=True, timeout=120, cwd=Path(__file__).parents[2])
    assert out.stdout.splitlines() == ["from the parent", "True"]
