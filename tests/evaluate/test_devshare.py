"""Device memory handed between processes as file descriptors (evaluate.wire.devshare): what a machine without a
CUDA driver says, and the fd passing. Mapping real device memory is tested on the H200 (tests/test_gpu.py,
benchmarks/output_path_probe.py: every byte compared, across the sandbox's PID namespace)."""

from __future__ import annotations

import os
import socket

import pytest

from kforge_bot.evaluate.wire import devshare

no_cuda = pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has a CUDA driver")


@no_cuda
def test_without_a_driver_the_reason_is_given_and_nothing_is_mapped() -> None:
    assert "no CUDA driver library" in (devshare.supported(0) or "")
    r, w = os.pipe()
    try:
        with pytest.raises(devshare.DeviceShareError, match="no CUDA driver library"):
            devshare.ImportedBuffer(r, 1 << 21, 0)
    finally:
        os.close(r)
        os.close(w)


def test_an_fd_and_its_message_travel_together_over_a_seqpacket_socket() -> None:
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    try:
        devshare.send_fds(theirs, b'{"name": "out"}', [w])
        message, fds = devshare.receive_fds(mine)
        assert message == b'{"name": "out"}' and len(fds) == 1
        os.write(fds[0], b"x")  # the same pipe, through another descriptor
        assert os.read(r, 1) == b"x"
        devshare.close_all(fds + [fds[0]])  # closing twice is harmless
    finally:
        for fd in (r, w):
            os.close(fd)
        mine.close()
        theirs.close()
