"""Workers forked from the forkserver (evaluate.forked): when they are, what they skip, and that the forkserver
ends with the bot."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kforge_bot.evaluate import forked, isolation
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire import forking
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"
needs_sandbox = pytest.mark.skipif(not isolation.probe().available and os.environ.get("CI") != "true",
                                   reason=f"the sandbox is unavailable here: {isolation.probe().describe()}")


def test_only_sandboxed_cpu_workers_of_the_worker_entry_are_forked(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.delenv("KFORGE_BWRAP", raising=False)
    monkeypatch.delenv("KFORGE_FORKSERVER", raising=False)
    cpu, cuda = isolation.View(scratch=tmp_path), isolation.View(scratch=tmp_path, devices="cuda")
    assert forked.usable(forked.ENTRY, cpu, "cpu")
    assert not forked.usable(forked.ENTRY, None, "cpu")  # unsandboxed: a plain process
    assert forked.usable("kforge_bot.workloads.worker", cpu, "cpu")  # a workload's run too
    assert not forked.usable("kforge_bot.evaluate.worker.imports", cpu, "cpu")  # nothing else
    assert not forked.usable(forked.ENTRY, cuda, "cuda:0")  # not yet measured on a GPU
    monkeypatch.setenv("KFORGE_FORKSERVER", "1")
    assert forked.usable(forked.ENTRY, cuda, "cuda:0")
    monkeypatch.setenv("KFORGE_FORKSERVER", "0")
    assert not forked.usable(forked.ENTRY, cpu, "cpu")
    monkeypatch.delenv("KFORGE_FORKSERVER")
    monkeypatch.setenv("KFORGE_BWRAP", "/usr/bin/bwrap")  # a wrapper of the caller's: that is what runs
    assert not forked.usable(forked.ENTRY, cpu, "cpu")
    monkeypatch.setenv("KFORGE_FORKSERVER", "1")  # unless asked for (a carried bwrap, as on the device image)
    assert forked.usable(forked.ENTRY, cpu, "cpu")


def test_a_wait_status_travels_as_subprocess_reports_it() -> None:
    for status, code in ((0, 0), (3 << 8, 3), (9, -9), (11, -11)):
        assert forking.decode_status(forking.encode_status(status)) == code
    assert forking.decode_status(b"") is None


@pytest.mark.slow
@needs_sandbox
def test_a_forked_worker_imports_nothing_and_judges_as_a_fresh_one(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec(ADV / "problem.py")
    candidate = Implementation(_SOFTMAX, "ModelNew", "candidate.py", str(ADV))
    settings = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=60, isolation="required")
    monkeypatch.delenv("KFORGE_BWRAP", raising=False)
    results = {}
    for mode in ("", "0"):
        monkeypatch.setenv("KFORGE_FORKSERVER", mode)
        results[mode] = evaluate(spec, candidate, "cpu", settings, seeds=[3, 4])
    for result in results.values():
        assert result.verdict == "pass", result.reason
    forked_boot = results[""].details["phases"]["candidate_worker"]["boot"]
    fresh_boot = results["0"].details["phases"]["candidate_worker"]["boot"]
    assert forked_boot["torch_import_s"] == 0.0 and forked_boot["harness_import_s"] == 0.0
    assert fresh_boot["torch_import_s"] > 0.0


_SOFTMAX = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True)
'''

_BOT = """
from kforge_bot.evaluate import forked
from kforge_bot.environment import scrubbed_environment
server = forked.server_for(scrubbed_environment(), None)
print(server.proc.pid if server else 0, flush=True)
"""


@pytest.mark.slow
@needs_sandbox
def test_the_forkserver_ends_with_the_bot() -> None:
    out = subprocess.run([sys.executable, "-c", _BOT], capture_output=True, text=True, timeout=120, check=True)
    pid = int(out.stdout.split()[-1])
    assert pid, out.stderr
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid)


def _running(pid: int) -> bool:
    try:  # a zombie has ended (whoever adopted it reaps it in its own time)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
