"""A worker's activity from outside it (evaluate.wire.activity): what a build looks like, and what a hang looks like."""

from __future__ import annotations

import subprocess
import sys
import time

from kforge_bot.evaluate.wire.activity import BuildWatch, read_tree


def _started(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_process_tree_counts_its_children_and_their_cpu() -> None:
    parent = _started("import subprocess, sys, time\n"
                      "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
                      "time.sleep(30)")
    try:
        deadline = time.monotonic() + 20
        while read_tree(parent.pid).processes < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert read_tree(parent.pid).processes == 2
    finally:
        parent.kill()
        parent.wait()
    assert read_tree(parent.pid).processes == 0  # gone: nothing left to read


def test_a_spinning_process_is_quiet_and_a_compiler_child_is_a_build() -> None:
    spinner = _started("while True: pass")
    try:
        time.sleep(1.0)  # past the interpreter's start, which reads files
        watch = BuildWatch(spinner.pid, now=0.0)
        for t in (1.0, 2.0, 3.0):
            time.sleep(0.3)
            watch.look(t)
        assert watch.last_active == 0.0 and watch.cpu_s > 0.0  # busy (as a loaded machine lets it), but no build
    finally:
        spinner.kill()
        spinner.wait()
    builder = _started("import subprocess, time\n"
                       "while True:\n"
                       "    subprocess.run(['cc', '-c', '-x', 'c', '-', '-o', '/dev/null'], input=b'int f(void) { return 1; }')")
    try:
        time.sleep(1.0)
        watch = BuildWatch(builder.pid, now=0.0)
        seen = 0.0
        for t in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0):
            time.sleep(0.3)
            watch.look(t)
            seen = max(seen, watch.last_active)
        assert seen > 0.0  # a compiler child or its output seen at some look
    finally:
        builder.kill()
        builder.wait()
