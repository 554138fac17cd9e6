"""The workers' bytecode cache: filled by the bot, read by sandboxed workers, written by none of them."""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import BYTECODE_FILL_TIMEOUT_S

from kforge_bot.environment import scrubbed_environment
from kforge_bot.evaluate import bytecode, isolation

needs_sandbox = pytest.mark.skipif(not isolation.probe().available and os.environ.get("CI") != "true",
                                   reason=f"the sandbox is unavailable here: {isolation.probe().describe()}")


@pytest.fixture(autouse=True)
def _decide_afresh() -> None:
    bytecode.reset()
    yield
    bytecode.reset()


def _package(root: Path, value: int, compiled: bool) -> Path:
    folder = root / "kforge_probe_pkg"
    folder.mkdir(parents=True)
    source = folder / "__init__.py"
    source.write_text(f"VALUE = {value}\n")
    if compiled:
        py_compile.compile(str(source), doraise=True)
    return source


def test_an_installation_without_bytecode_is_told_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert bytecode.installation_has_bytecode("torch")  # pip compiled this one
    _package(tmp_path / "bare", 1, compiled=False)
    _package(tmp_path / "built", 1, compiled=True)
    monkeypatch.syspath_prepend(str(tmp_path / "bare"))
    assert not bytecode.installation_has_bytecode("kforge_probe_pkg")
    monkeypatch.syspath_prepend(str(tmp_path / "built"))
    sys.modules.pop("kforge_probe_pkg", None)
    assert bytecode.installation_has_bytecode("kforge_probe_pkg")


@pytest.mark.slow
def test_the_cache_holds_what_a_worker_imports_and_is_filled_once(bytecode_cache: Path) -> None:
    import torch

    import kforge_bot.evaluate.worker.entry as worker

    for module in (torch, worker):
        source = Path(module.__file__).resolve()
        compiled = bytecode_cache / source.parent.relative_to("/") / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
        assert compiled.is_file(), compiled
    assert bytecode._key() in json.loads((bytecode_cache / "primed.json").read_text())["keys"]
    # Filled: nothing to do (nothing rewritten; seconds only for the lock, 0.03 s on a loaded host, not a fill's minute).
    primed_at = (bytecode_cache / "primed.json").stat().st_mtime_ns
    assert bytecode.prime(bytecode_cache, scrubbed_environment()) < 5.0
    assert (bytecode_cache / "primed.json").stat().st_mtime_ns == primed_at


@pytest.mark.slow
def test_workers_get_the_cache_only_where_it_is_wanted(bytecode_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFORGE_BYTECODE_DIR", str(bytecode_cache))
    env = scrubbed_environment()
    assert bytecode.for_workers(env) == bytecode.Bytecode(None, "installation")  # auto: torch has its own
    for mode, directory in (("on", bytecode_cache), ("off", None)):
        bytecode.reset()
        monkeypatch.setenv("KFORGE_BYTECODE", mode)
        assert bytecode.for_workers(env).directory == directory
    assert "KFORGE_BYTECODE=off" in bytecode.for_workers(env).source



@pytest.mark.slow
def test_the_bot_reads_its_own_later_imports_from_the_cache_but_never_over_the_users_prefix(
        bytecode_cache: Path, tmp_path: Path) -> None:
    decide = ("from kforge_bot import environment; from kforge_bot.evaluate import bytecode; "
              "bytecode.for_workers(environment.scrubbed_environment())")
    show = "import sys, torch; print(sys.pycache_prefix, torch.__spec__.cached)"
    env = {**os.environ, "KFORGE_BYTECODE": "on", "KFORGE_BYTECODE_DIR": str(bytecode_cache)}
    env.pop("PYTHONPYCACHEPREFIX", None)

    def run(code: str, **extra: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                              check=True, timeout=300).stdout.split()

    prefix, cached = run(f"{decide}\n{show}")
    assert prefix == str(bytecode_cache) and cached.startswith(str(bytecode_cache) + "/") and Path(cached).is_file()
    assert run(f"import torch\n{decide}\n{show}")[0] == "None"  # torch came first: nothing changes under it
    mine = str(tmp_path / "users-own")
    assert run(f"{decide}\n{show}", PYTHONPYCACHEPREFIX=mine)[0] == mine

def test_a_cache_that_cannot_be_filled_is_reported_and_workers_still_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("KFORGE_BYTECODE", "on")
    monkeypatch.setenv("KFORGE_BYTECODE_DIR", str(blocked / "bytecode"))
    chosen = bytecode.for_workers(scrubbed_environment())
    assert chosen.directory is None and chosen.source.startswith("compiled at every start")
    warning = capsys.readouterr().err.strip()
    assert warning.count("\n") == 0 and str(blocked / "bytecode") in warning and "KFORGE_BYTECODE_DIR" in warning


def test_the_environment_never_points_a_worker_at_a_host_folder_of_bytecode(tmp_path: Path) -> None:
    base = {"PYTHONPYCACHEPREFIX": "/home/someone/pycache"}
    assert "PYTHONPYCACHEPREFIX" not in isolation.environment(base, isolation.View(scratch=tmp_path))
    cached = isolation.View(scratch=tmp_path, bytecode=tmp_path / "cache")
    assert isolation.environment(base, cached)["PYTHONPYCACHEPREFIX"] == bytecode.MOUNT


@pytest.mark.slow
@needs_sandbox
def test_a_sandboxed_process_imports_from_the_cache_and_cannot_write_to_it(bytecode_cache: Path,
                                                                          tmp_path: Path) -> None:
    # A forged entry: bytecode of `VALUE = 2` filed under a source that says `VALUE = 1` (same size and time).
    # Only an interpreter reading the cache sees 2; the same entry shows why workers must never write there.
    cache = tmp_path / "cache"
    source = _package(tmp_path / "src", 2, compiled=False)
    stamp = os.stat(source).st_mtime_ns
    subprocess.run([sys.executable, "-c", f"import py_compile; py_compile.compile({str(source)!r}, doraise=True)"],
                   env={**os.environ, "PYTHONPYCACHEPREFIX": str(cache)}, check=True)
    source.write_text("VALUE = 1\n")
    os.utime(source, ns=(stamp, stamp))
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import kforge_probe_pkg; print(kforge_probe_pkg.VALUE)\n"
             "import os\nfor folder in (os.environ.get('PYTHONPYCACHEPREFIX'), sys.argv[2]):\n"
             "    try:\n        open(os.path.join(folder or '/nonexistent', 'planted.pyc'), 'w').write('x')\n"
             "        print('WROTE', folder)\n    except (OSError, TypeError):\n        pass\n")

    def run(view: isolation.View) -> str:
        argv = isolation.command([sys.executable, "-c", probe, str(source.parents[1]), str(view.bytecode)], view)
        env = isolation.environment(scrubbed_environment(), view)
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=view.scratch).stdout

    scratch = Path(tempfile.mkdtemp(dir=tmp_path))
    readable = (source.parents[1],)
    assert run(isolation.View(scratch=scratch, readable=readable, bytecode=cache)).split() == ["2"]
    assert run(isolation.View(scratch=scratch, readable=readable)).split() == ["1"]  # no cache: the source
    assert not list(cache.rglob("planted.pyc"))


@pytest.fixture
def claimed_cache(tmp_path: Path) -> Path:
    """A safe folder whose primed.json has the right key: all `_choose` reads of a filled cache (filling the
    real one takes the session's bytecode_cache 14 s, which only the slow tests need)."""
    folder = tmp_path / "claimed"
    folder.mkdir(mode=0o700)
    (folder / "primed.json").write_text(json.dumps({"keys": [bytecode._key()]}))
    assert bytecode.unsafe_reason(folder) is None and bytecode._primed(folder)
    return folder


@pytest.mark.parametrize("make", ["writable by others", "a link", "relative"])
def test_a_folder_others_could_write_is_never_used_even_when_it_claims_to_be_filled(
        make: str, claimed_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "cache"
    if make == "writable by others":
        folder.mkdir()
        shutil.copy(claimed_cache / "primed.json", folder / "primed.json")  # the right key: a forger can compute it
        folder.chmod(0o777)
    elif make == "a link":
        folder.symlink_to(claimed_cache)
    else:
        monkeypatch.chdir(tmp_path)
        folder = Path("cache")
    monkeypatch.setenv("KFORGE_BYTECODE", "on")
    monkeypatch.setenv("KFORGE_BYTECODE_DIR", str(folder))
    chosen = bytecode.for_workers(scrubbed_environment())
    assert chosen.directory is None and chosen.source.startswith("compiled at every start")
    assert "not safe" in capsys.readouterr().err


def test_the_lock_is_never_followed_out_of_the_cache(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("kept")
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    (folder / ".lock").symlink_to(victim)
    with pytest.raises(OSError):
        bytecode.prime(folder, scrubbed_environment())
    assert victim.read_text() == "kept"


@pytest.mark.slow
@pytest.mark.timeout(BYTECODE_FILL_TIMEOUT_S + 600)  # a whole fill, as the session's cache (conftest.py)
def test_filling_imports_nothing_from_the_cache_or_the_current_folder(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "planted-code-ran"
    planted = f"open({str(marker)!r}, 'w').write('ran')\nraise ImportError('planted')\n"
    folder = tmp_path / "cache"
    for root in (folder, tmp_path / "cwd"):
        (root / "kforge_bot").mkdir(parents=True)
        (root / "kforge_bot" / "__init__.py").write_text(planted)
        (root / "torch.py").write_text(planted)
    folder.chmod(0o700)
    monkeypatch.chdir(tmp_path / "cwd")
    assert bytecode.prime(folder, scrubbed_environment(), timeout_s=BYTECODE_FILL_TIMEOUT_S) > 0
    assert not marker.exists()
    assert bytecode._key() in json.loads((folder / "primed.json").read_text())["keys"]
    assert "torch=" in bytecode._key() and "kforge-bot=" in bytecode._key()


@needs_sandbox
def test_a_cache_deleted_under_a_running_bot_leaves_workers_running(tmp_path: Path) -> None:
    view = isolation.View(scratch=tmp_path, bytecode=tmp_path / "deleted")
    argv = isolation.command([sys.executable, "-c", "import sys; print(sys.pycache_prefix)"], view)
    proc = subprocess.run(argv, env=isolation.environment(scrubbed_environment(), view), capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.split() == [bytecode.MOUNT], proc.stderr
