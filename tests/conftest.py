"""Shared test fixtures. GPU tests are marked `gpu` and skipped where no CUDA device exists."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests/data/kernel_library is a kernel library `kforge-bot init` reads as text: its own tests are data, not
# kforge's (a conftest.py of its own there would shadow this one's name for `from conftest import ...`).
collect_ignore_glob = ["data/kernel_library/*", "data/kernel_library_src/*"]

OPTIMIZE_FIXTURE = Path(__file__).parent / "data" / "optimize"

# Every kforge-bot process the suite starts finds tests/fakes/quiet_machine first on its path, whose sitecustomize
# turns the timing-disturbance detector off there as this conftest does here (helpers that set their own
# PYTHONPATH put it first too).
QUIET_MACHINE = Path(__file__).parent / "fakes" / "quiet_machine"
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(QUIET_MACHINE), os.environ.get("PYTHONPATH", "")) if p)

# Nothing left behind: every temporary folder of the suite, of its subprocesses and of the code under test goes to
# one session folder (TMPDIR, which tempfile, the workers and torch follow), removed when the session ends, so
# /tmp is as it was. Before that, the folders the code under test must remove itself (its scratch: a git worktree,
# the sandbox's private folders, a profiler's, doctor's, torch's compiler cache) are looked for there, and any one
# found fails the session. Folders a test keeps on purpose (a report a user would read, a test's own cache) are
# removed with the session folder.
SESSION_TMP = Path(tempfile.mkdtemp(prefix="kforge-suite-"))
os.environ["TMPDIR"] = str(SESSION_TMP)
tempfile.tempdir = str(SESSION_TMP)
SCRATCH_PATTERNS = ("kforge-wt-*", ".private", "torchinductor_*", "kforge-sandbox-probe-*", "kforge-doctor-*",
                    "kforge-profile-*", "kforge-ncu-*")


def scratch_left_behind(folder: Path) -> list[str]:
    """The code under test's scratch folders still in `folder`."""
    return sorted(p.name for pattern in SCRATCH_PATTERNS for p in folder.glob(pattern))


# Which test first left each scratch folder behind: the session's failure names it, not just the folder.
LEFT_BY: dict[str, str] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    for name in scratch_left_behind(SESSION_TMP):
        LEFT_BY.setdefault(name, item.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = scratch_left_behind(SESSION_TMP)
    shutil.rmtree(SESSION_TMP, ignore_errors=True)
    if left:
        named = ", ".join(f"{name} (first seen after {LEFT_BY.get(name, 'the session')})" for name in left)
        print(f"\nleft behind in the temporary folder by the code under test: {named}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    """A copy of the optimize fixture (a CPU matmul with tunables), free to be rewritten by a run."""
    folder = tmp_path / "kernels"
    shutil.copytree(OPTIMIZE_FIXTURE, folder)
    return folder


@pytest.fixture
def recorded_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KFORGE_NCU is a stand-in printing ncu's output recorded on an H200, and the CPU target stands in for
    CUDA (the collector's plumbing is the same)."""
    from fakes.ncu import printing_the_recording

    from kforge_bot.counters import ncu

    monkeypatch.setenv("KFORGE_NCU", str(printing_the_recording(tmp_path / "tool")))
    monkeypatch.setattr(ncu, "unavailable", lambda target: None)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return False
    return torch.cuda.is_available()


# Filling the bytecode cache compiles torch's whole source: about a minute on a quiet 2-core machine, and past the
# 600 s default timeouts beside two busy loops (measured: the fill timed out after 600 s). The test that fills it
# (whichever asks for it first) gets this long, for the fill and for itself.
BYTECODE_FILL_TIMEOUT_S = 1800.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "bytecode_cache" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(BYTECODE_FILL_TIMEOUT_S + 600))
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device: none on this machine (GPU tests run on the H200, see benchmarks/)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# The suite runs on shared, loaded machines (tests must pass beside busy loops), where the timing-disturbance
# detector (evaluate.wire.conditions) would call most timings inconclusive: its limits are off for the whole session
# (module-scoped fixtures evaluate too), except in tests marked `disturbance`, which get the defaults back.
from kforge_bot.evaluate.wire import conditions as _conditions  # noqa: E402

DISTURBANCE_DEFAULTS = {name: getattr(_conditions, name) for name in ("PREEMPTED_SHARE", "PREEMPTED_GAP",
                                                                      "CROWDED_SHARE", "WAIT_SHARE")}
for _name in DISTURBANCE_DEFAULTS:
    setattr(_conditions, _name, 1.0)


@pytest.fixture(autouse=True)
def timing_disturbance_defaults(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests marked `disturbance` test the detector at its defaults (or at limits of their own)."""
    if "disturbance" in request.keywords:
        for name, value in DISTURBANCE_DEFAULTS.items():
            monkeypatch.setattr(_conditions, name, value)


@pytest.fixture(scope="session")
def bytecode_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bytecode cache filled as the bot fills it (once for the session: it imports torch from source)."""
    from kforge_bot.evaluate import bytecode
    from kforge_bot.environment import scrubbed_environment

    directory = tmp_path_factory.mktemp("bytecode")
    bytecode.prime(directory, scrubbed_environment(), timeout_s=BYTECODE_FILL_TIMEOUT_S)
    return directory


@pytest.fixture
def workers_use_bytecode_cache(bytecode_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Sandboxed workers get the cache, as on an installation without bytecode (this one has its own)."""
    from kforge_bot.evaluate import bytecode

    monkeypatch.setenv("KFORGE_BYTECODE", "on")
    monkeypatch.setenv("KFORGE_BYTECODE_DIR", str(bytecode_cache))
    bytecode.reset()
    yield bytecode_cache
    bytecode.reset()



# The fast lane (`-m "not slow"`) starts no torch worker. To list the tests that would, run it with
# KFORGE_TEST_WORKER_LOG=<file>: each real worker asked for, in the suite's process or in a command's (through
# tests/fakes/quiet_machine), is refused at once and the test's id appended to that file.
if os.environ.get("KFORGE_TEST_WORKER_LOG"):
    from fakes.workers import refuse_real_workers

    from kforge_bot.evaluate import sandbox as _sandbox

    refuse_real_workers(_sandbox)
