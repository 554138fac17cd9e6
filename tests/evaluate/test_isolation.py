"""The OS sandbox around every worker, attacked as a candidate would attack it.

Each attack is a correct softmax candidate whose module, at import, tries one escape and raises
`ESCAPED: ...` if it works. Sandboxed, every one of them must pass (the escape failed and the kernel was
judged as usual); with the sandbox switched off (`isolation: off`, what the harness did before it existed)
the same candidate must be caught escaping, which proves each test can fail. The runtime layer is used
(the static scan is off), since a real attacker spells these past any scan.

Run as an ordinary user: `.ci/run` does so in CI. Root reads other processes' memory and writes read-only
files' owners' places through permission checks, so some escapes would "work" unsandboxed only as root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import kforge_bot.evaluate.api as api
from kforge_bot.evaluate import isolation, references, sandbox
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"
SANDBOXED = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=60, isolation="required")
UNSANDBOXED = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=60, isolation="off")
FAKE = {"GITHUB_TOKEN": "ghp_isolation_test_token", "OPENAI_API_KEY": "sk-isolation-test-key",
        "KFORGE_LLM_API_KEY": "kforge-isolation-test-key"}

pytestmark = pytest.mark.skipif(not isolation.probe().available and os.environ.get("CI") != "true",
                                reason=f"the sandbox is unavailable here: {isolation.probe().describe()}")

SOFTMAX = '''

class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True)
'''


def _candidate(attack: str, root: Path) -> Implementation:
    source = "import os, sys, signal, subprocess, time\nimport torch\nimport torch.nn as nn\n\n" + \
        textwrap.dedent(attack) + SOFTMAX
    return Implementation(source, "ModelNew", "attack.py", str(root))


@pytest.fixture(autouse=True)
def _runtime_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "static_findings", lambda source: [])
    for key, value in FAKE.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout as actions/checkout leaves it: the token in .git/config, a result cache, kernels."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ADV / "problem.py", root / "problem.py")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    with open(root / ".git" / "config", "a") as config:
        config.write('[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic ghp_isolation_test_token\n')
    (root / ".kforge-cache").mkdir()
    (root / ".kforge-cache" / "entry.json").write_text("{}")
    return root


def _judge(attack: str, repo: Path, settings: EvalSettings):
    spec = load_spec(repo / "problem.py")
    return evaluate(spec, _candidate(attack, repo), "cpu", settings, seeds=[3, 4])


def _escaped(result) -> bool:
    return result.verdict != "pass" and "ESCAPED" in result.reason


READ_PARENT = '''
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        continue
    if b"ghp_isolation_test_token" in environ or b"sk-isolation-test-key" in environ:
        raise RuntimeError(f"ESCAPED: a token in /proc/{pid}/environ")
'''

READ_PARENT_MEMORY = '''
ppid = os.getppid()
try:
    maps = open(f"/proc/{ppid}/maps").read().splitlines()
    mem = open(f"/proc/{ppid}/mem", "rb")
except OSError:
    maps = []
for line in maps:
    if "rw-p" not in line:
        continue
    start, end = (int(x, 16) for x in line.split()[0].split("-"))
    try:
        mem.seek(start)
        if b"ghp_isolation_test_token" in mem.read(min(end - start, 1 << 24)):
            raise RuntimeError(f"ESCAPED: the token in the memory of process {ppid}")
    except (OSError, ValueError, OverflowError):
        continue
'''

READ_GIT_AND_CACHE = '''
for path in ({git!r}, {cache!r}, {credentials!r}):
    try:
        data = open(path).read()
    except OSError:
        continue
    raise RuntimeError(f"ESCAPED: read {{path}}")
for folder in ("/dev/shm", "/tmp"):
    leaked = [n for n in os.listdir(folder) if n.startswith("kforge-ref-")]
    if leaked:
        raise RuntimeError(f"ESCAPED: another evaluation's reference outputs in {{folder}}: {{leaked}}")
'''

WRITE_OUTSIDE = '''
for path in {targets!r}:
    try:
        with open(path, "a") as handle:
            handle.write("# planted by a candidate\\n")
    except OSError:
        continue
    raise RuntimeError(f"ESCAPED: wrote {{path}}")
'''

SIGNAL_EVERYONE = '''
me = os.getpid()
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != me:
        try:
            os.kill(int(pid), signal.SIGSTOP)
        except OSError:
            pass
'''

DAEMON = '''
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", {token!r}], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
'''


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


BOT = """
import json, sys
import kforge_bot.evaluate.api as api
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, load_spec
api.static_findings = lambda source: []
spec = load_spec(sys.argv[1])
candidate = Implementation(open(sys.argv[2]).read(), "ModelNew", "attack.py", sys.argv[3])
settings = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=60, isolation=sys.argv[4])
print(json.dumps(api.evaluate(spec, candidate, "cpu", settings, seeds=[3, 4]).to_dict()))
"""


def _judge_in_a_bot_started_with_tokens(attack: str, repo: Path, isolation_mode: str) -> dict:
    """/proc/<pid>/environ shows the environment a process was started with: start a bot with the tokens."""
    source = repo.parent / f"attack_{isolation_mode}.py"
    source.write_text(_candidate(attack, repo).source)
    out = subprocess.run([sys.executable, "-c", BOT, str(repo / "problem.py"), str(source), str(repo), isolation_mode],
                         capture_output=True, text=True, timeout=180, env={**os.environ, **FAKE}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_parents_environment_and_memory_are_out_of_reach(repo: Path) -> None:
    boxed = _judge_in_a_bot_started_with_tokens(READ_PARENT, repo, "required")
    assert boxed["verdict"] == "pass" and boxed["details"]["isolation"].startswith("sandboxed"), boxed["reason"]
    result = _judge(READ_PARENT_MEMORY, repo, SANDBOXED)
    assert result.verdict == "pass", result.reason
    # What the wall stops: unsandboxed, both attacks find the token.
    assert "ESCAPED" in _judge_in_a_bot_started_with_tokens(READ_PARENT, repo, "off")["reason"]
    assert _escaped(_judge(READ_PARENT_MEMORY, repo, UNSANDBOXED))


@pytest.mark.slow
def test_git_the_result_cache_credentials_and_other_evaluations_are_invisible(repo: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".git-credentials").write_text("https://x-access-token:ghp_isolation_test_token@github.com\n")
    monkeypatch.setenv("HOME", str(home))
    attack = READ_GIT_AND_CACHE.format(git=str(repo / ".git" / "config"),
                                       cache=str(repo / ".kforge-cache" / "entry.json"),
                                       credentials=str(home / ".git-credentials"))
    result = _judge(attack, repo, SANDBOXED)
    assert result.verdict == "pass", result.reason
    assert _escaped(_judge(attack, repo, UNSANDBOXED))


@pytest.mark.slow
def test_nothing_outside_the_scratch_directory_can_be_written(repo: Path) -> None:
    import kforge_bot.evaluate.wire.checks as checks
    import torch

    targets = [checks.__file__, torch.__file__, str(repo / "problem.py"), str(repo / ".git" / "hooks" / "pre-push"),
               str(repo / ".kforge-cache" / "forged.json")]
    before = {t: Path(t).read_bytes() if Path(t).exists() else None for t in targets}
    result = _judge(WRITE_OUTSIDE.format(targets=targets), repo, SANDBOXED)
    assert result.verdict == "pass", result.reason
    assert {t: Path(t).read_bytes() if Path(t).exists() else None for t in targets} == before


PLANT_BYTECODE = '''
for folder in (os.environ.get("PYTHONPYCACHEPREFIX") or "/nonexistent", {host!r}):
    try:
        with open(os.path.join(folder, "planted.pyc"), "w") as handle:
            handle.write("planted")
    except OSError:
        continue
    raise RuntimeError(f"ESCAPED: wrote into the bytecode cache at {{folder}}")
'''


@pytest.mark.slow
def test_a_candidate_cannot_plant_bytecode_for_a_later_evaluation(repo: Path, workers_use_bytecode_cache: Path) -> None:
    attack = PLANT_BYTECODE.format(host=str(workers_use_bytecode_cache))
    try:
        result = _judge(attack, repo, SANDBOXED)
        assert result.verdict == "pass", result.reason
        assert result.details["phases"]["bytecode"]["source"] == "kforge-bot cache"
        assert not list(workers_use_bytecode_cache.rglob("planted.pyc"))
        # Unsandboxed workers never get the cache, but the same user can write to it: the attack works.
        assert _escaped(_judge(attack, repo, UNSANDBOXED))
    finally:
        for planted in workers_use_bytecode_cache.rglob("planted.pyc"):
            planted.unlink()


GIT_PUSH = '''
result = subprocess.run(["git", "-C", {repo!r}, "push", "-q", "origin", "HEAD:refs/heads/planted"],
                        capture_output=True, text=True)
if result.returncode == 0:
    raise RuntimeError("ESCAPED: pushed a branch from the checkout")
'''


@pytest.mark.slow
def test_a_candidate_cannot_push_from_the_checkout(repo: Path, tmp_path: Path) -> None:
    ident = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@e"}
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    for args in (["remote", "add", "origin", str(origin)], ["add", "problem.py"], ["commit", "-q", "-m", "k"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=ident)
    attack = GIT_PUSH.format(repo=str(repo))
    result = _judge(attack, repo, SANDBOXED)
    assert result.verdict == "pass", result.reason
    assert "planted" not in subprocess.run(["git", "-C", str(origin), "branch"], capture_output=True, text=True).stdout
    assert _escaped(_judge(attack, repo, UNSANDBOXED))  # the origin is a local path: no network needed


@pytest.mark.slow
def test_a_candidate_cannot_stop_or_signal_the_bot(repo: Path) -> None:
    started = time.monotonic()
    result = _judge(SIGNAL_EVERYONE, repo, SANDBOXED)
    # This process (the bot) was not stopped: it is here, asserting, and promptly.
    assert result.verdict == "pass", result.reason
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_a_daemon_started_by_a_candidate_dies_with_its_worker(repo: Path) -> None:
    token = f"kforge-daemon-{os.getpid()}-{time.monotonic_ns()}"
    result = _judge(DAEMON.format(token=token), repo, SANDBOXED)
    assert result.verdict == "pass", result.reason
    deadline = time.monotonic() + 5
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_with(token)
    # Unsandboxed, the same daemon outlives the evaluation (the process-group kill misses a new session).
    escaped = f"{token}-unsandboxed"
    _judge(DAEMON.format(token=escaped), repo, UNSANDBOXED)
    survivors = _processes_with(escaped)
    for pid in survivors:
        os.kill(pid, 9)
    assert survivors


FLOOD_CHANNEL = '''
fd = next(int(a) for a in sys.argv if a.isdigit())  # the result channel's descriptor
chunk = b"x" * (1 << 20)
while True:
    os.write(fd, chunk)
'''

FLOOD_STDOUT = '''
chunk = "y" * (1 << 16)
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    sys.stdout.write(chunk)
'''


@pytest.mark.slow
def test_a_flood_of_the_result_channel_is_cut_off_within_seconds(repo: Path) -> None:
    started = time.monotonic()
    result = _judge(FLOOD_CHANNEL, repo, SANDBOXED)
    assert result.verdict == "rejected"
    assert "flooded the result channel (a line over 8 MiB)" in result.reason
    assert time.monotonic() - started < 40


@pytest.mark.slow
def test_printing_without_end_keeps_only_a_tail(repo: Path) -> None:
    result = _judge(FLOOD_STDOUT, repo, SANDBOXED)
    assert result.verdict == "pass", result.reason
    assert len(result.details["log_tail"]) <= 4000


@pytest.mark.slow
def test_required_isolation_refuses_to_run_without_a_sandbox(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kforge_bot.errors import KforgeError

    isolation.probe.cache_clear()
    monkeypatch.setenv("KFORGE_BWRAP", "/nonexistent/bwrap")
    try:
        with pytest.raises(KforgeError, match="isolation is required but this machine cannot sandbox user code: "
                                              "bubblewrap \\(bwrap\\) is not installed"):
            _judge("", repo, SANDBOXED)
        preferred = _judge("", repo, EvalSettings(seeds=2, measure=False, profile=False, timeout_s=60))
        assert preferred.verdict == "pass" and preferred.details["isolation"] == "not sandboxed"
    finally:
        isolation.probe.cache_clear()


def test_the_view_hides_git_and_credentials_inside_readable_folders(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / "kernels" / ".git").mkdir(parents=True)
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text("gitdir: /elsewhere\n")  # a worktree's .git is a file
    view = isolation.View(scratch=tmp_path / "scratch", readable=(tmp_path / "kernels", tmp_path / "wt", tmp_path),
                          devices="cuda")
    argv = isolation.command(["true"], view, "bwrap")
    pairs = list(zip(argv, argv[1:], argv[2:]))
    assert ("--ro-bind", str(tmp_path), str(tmp_path)) in pairs
    assert ("--tmpfs", str(tmp_path / ".ssh")) in zip(argv, argv[1:])
    assert ("--ro-bind", "/dev/null", str(tmp_path / "wt" / ".git")) in pairs
    assert ("--tmpfs", str(tmp_path / "kernels" / ".git")) in zip(argv, argv[1:])
    assert ("--bind", str(tmp_path / "scratch"), str(tmp_path / "scratch")) in pairs
    assert "--unshare-all" in argv and "--die-with-parent" in argv and argv[-2:] == ["--", "true"]
    # the readable folders under tmp_path are inside the one bound folder: bound once
    inbox = str(tmp_path / "scratch" / "inbox")
    assert sum(1 for a, b in zip(argv, argv[1:]) if a == "--ro-bind" and b.startswith(str(tmp_path))
               and b != inbox) == 1
    # The scratch's inbox read-only over its writable bind (shipped inputs: only the bot writes it).
    assert pairs.index(("--ro-bind", inbox, inbox)) > pairs.index(("--bind", str(tmp_path / "scratch"),
                                                                   str(tmp_path / "scratch")))


def test_worker_start_cost_is_recorded_by_the_benchmark() -> None:
    """The sandbox's start cost is measured by benchmarks/sandbox_cost.py, not asserted here (a shared CPU);
    this only checks the benchmark runs and reports both figures."""
    out = subprocess.run([sys.executable, str(Path(__file__).parents[2] / "benchmarks" / "sandbox_cost.py"),
                          "--runs", "3", "--json", "-"], capture_output=True, text=True, timeout=120, check=True)
    data = json.loads(out.stdout)
    assert data["runs"] == 3 and data["sandboxed_ms"]["median"] > 0 and data["plain_ms"]["median"] > 0


@pytest.mark.slow
def test_a_sandbox_that_cannot_start_is_the_bots_error_not_a_verdict(repo: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from kforge_bot.errors import KforgeError

    real = sandbox.sandbox_view

    def broken(*args, **kwargs):
        view = real(*args, **kwargs)
        return isolation.View(scratch=view.scratch, readable=view.readable, devices=view.devices,
                              writable=(Path("/nonexistent/kforge-test"),))

    for module in (api, references):  # the candidate's worker and the reference's
        monkeypatch.setattr(module, "sandbox_view", broken)
    # bwrap's words, or the forkserver's sandbox's (evaluate.forked) where the worker was forked
    with pytest.raises(KforgeError, match="the sandbox could not start a worker: (bwrap: Can't find source path|"
                                          "kforge-sandbox: cannot bind) /nonexistent/kforge-test"):
        _judge("", repo, SANDBOXED)


READ_PLANTED = '''
for path in {planted!r}:
    try:
        data = open(path).read()
    except OSError:
        continue
    raise RuntimeError(f"ESCAPED: read {{path}}")
'''


@pytest.mark.slow
@pytest.mark.parametrize("planted_in", ["cwd", "runner_temp"])
def test_the_bots_working_folder_and_runner_temp_are_invisible(repo: Path, tmp_path: Path, planted_in: str) -> None:
    """Attack (issue 28, class 6): `python -m` puts the working folder on sys.path, and every sys.path entry was
    mounted; under Actions that folder can be $RUNNER_TEMP, where actions/checkout leaves credential files. The bot
    here runs as `python -m`, from a folder holding a planted credential, with a fake $RUNNER_TEMP (on PATH too,
    as a setup step may put it) holding another."""
    cwd, runner_temp = tmp_path / "cwd", tmp_path / "runner_temp"
    for folder in (cwd, runner_temp):
        folder.mkdir()
        (folder / "credentials").write_text("ghp_isolation_test_token\n")
    attack = READ_PLANTED.format(planted=[str(tmp_path / planted_in / "credentials")])
    (cwd / "attack.py").write_text(_candidate(attack, repo).source)
    (cwd / "kforge_test_bot.py").write_text(BOT)
    env = {**os.environ, "RUNNER_TEMP": str(runner_temp), "PATH": f"{runner_temp}{os.pathsep}{os.environ['PATH']}"}

    def bot(mode: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "kforge_test_bot", str(repo / "problem.py"), "attack.py", str(repo),
                              mode], cwd=cwd, capture_output=True, text=True, timeout=180, env=env, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    boxed = bot("required")
    assert boxed["verdict"] == "pass" and boxed["details"]["isolation"].startswith("sandboxed"), boxed["reason"]
    assert "ESCAPED" in bot("off")["reason"]


LOCK_FOLDERS = '''
inside = [os.environ[v] for v in ("HOME", "TMPDIR") if os.environ.get(v, "").startswith(os.getcwd())]
for base in {os.getcwd(), *inside}:
    locked = os.path.join(base, "locked", "inner")
    os.makedirs(locked)
    open(os.path.join(locked, "f"), "w").write("x")
    os.chmod(locked, 0)
    os.chmod(os.path.dirname(locked), 0o500)
'''


@pytest.mark.slow
@pytest.mark.parametrize("settings", [SANDBOXED, UNSANDBOXED], ids=["sandboxed", "unsandboxed"])
def test_scratch_is_removed_even_when_the_candidate_locks_folders_in_it(repo: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        settings: EvalSettings) -> None:
    """Attack (issue 28, class 7): a candidate that `chmod 000`s a folder in its scratch left it in /dev/shm after
    every evaluation (`rmtree(ignore_errors=True)` hid it)."""
    root = tmp_path / "scratch-root"
    root.mkdir()
    for module in (api, references):
        monkeypatch.setattr(module, "scratch_root", lambda: root)
    result = _judge(LOCK_FOLDERS, repo, settings)
    assert result.verdict == "pass", result.reason
    assert list(root.iterdir()) == []


# Exhaustion (issue 28, class 7). Each bomb is bounded, so that without the limit it ends by itself and the
# candidate passes (which is what the test then catches), and a failing run cannot take the machine down.
FORK_BOMB = '''
children = []
for _ in range(400):
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
'''
MEMORY_BOMB = '''
hoard = [bytearray(128 << 20) for _ in range(32)]  # 4 GiB, untouched: address space, not pages
'''
SHARED_MEMORY_BOMB = '''
import mmap
hoard = [mmap.mmap(-1, 128 << 20) for _ in range(32)]  # 4 GiB of shared anonymous memory, untouched
'''
DISK_FILLER = '''
for folder in (os.getcwd(), "/tmp"):
    for n in range(8):  # 8 x 96 MiB: each file under the 256 MiB limit, together over it
        with open(os.path.join(folder, f"filler{{n}}"), "wb") as handle:
            handle.write(b"x" * (96 << 20))
    time.sleep(1.5)  # a worker keeps running after it wrote (the bot looks every half second)
'''
PRIVATE_FOLDERS_FILLER = '''
for folder in ("/tmp", "/dev/shm", "/run"):  # 3 x 100 MiB: each folder under the 128 MiB limit, together over it
    for n in range(2):
        with open(os.path.join(folder, f"filler{{n}}"), "wb") as handle:
            handle.write(b"x" * (50 << 20))
time.sleep(1.5)
'''
HIDDEN_FILLER = '''
os.mkdir("locked")
handles = [open(f"locked/filler{{n}}", "wb") for n in range(3)]
os.chmod("locked", 0)  # then 3 x 100 MiB in a folder the bot cannot look into: each file under the 128 MiB limit
for handle in handles:
    handle.write(b"x" * (100 << 20))
    handle.flush()
time.sleep(1.5)
'''
ONE_HUGE_FILE = '''
with open("huge", "wb") as handle:
    for _ in range(12):  # 384 MiB: one file over the 256 MiB limit
        handle.write(b"x" * (32 << 20))
'''
CPU_HOG = '''
deadline = time.process_time() + 20.0
while time.process_time() < deadline:
    pass
'''
BOMBS = {
    "fork bomb": (FORK_BOMB, {"process_limit": 64}, ("compile_error",), ("Resource temporarily unavailable",)),
    "memory bomb": (MEMORY_BOMB, {"memory_limit_bytes": 2 << 30}, ("compile_error",), ("MemoryError",)),
    "shared memory bomb": (SHARED_MEMORY_BOMB, {"memory_limit_bytes": 2 << 30}, ("compile_error",),
                           ("Cannot allocate memory",)),
    "disk filler": (DISK_FILLER, {"scratch_limit_bytes": 256 << 20}, ("rejected",), ("into its scratch folder",)),
    # Found by the red-team pass: the sandbox's private /tmp, /dev/shm and /run were tmpfs mounts of the scratch's
    # size each, in memory and out of the bot's sight: four times the limit in all, the whole machine by default.
    "private folders filler": (PRIVATE_FOLDERS_FILLER, {"scratch_limit_bytes": 128 << 20}, ("rejected",),
                               ("into its scratch folder",)),
    "hidden filler": (HIDDEN_FILLER, {"scratch_limit_bytes": 128 << 20}, ("rejected",), ("into its scratch folder",)),
    # The file's own limit, or the folder's (looked at every half second) if it comes first.
    "one huge file": (ONE_HUGE_FILE, {"scratch_limit_bytes": 256 << 20}, ("compile_error", "rejected"),
                      ("File too large", "into its scratch folder")),
    "cpu hog": (CPU_HOG, {"cpu_limit_s": 3.0}, ("crash",), ("SIGXCPU",)),
}


@pytest.mark.slow
@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_exhaustion_ends_in_a_verdict_and_the_next_evaluation_goes_on(repo: Path, bomb: str) -> None:
    from dataclasses import replace

    attack, limit, verdicts, reasons = BOMBS[bomb]
    if bomb == "fork bomb" and os.geteuid() == 0:
        pytest.skip("RLIMIT_NPROC does not bind root (run as an ordinary user, as CI does)")
    result = _judge(attack.format(), repo, replace(SANDBOXED, **limit))
    assert result.verdict != "pass", f"the {bomb} was not stopped"
    assert result.verdict in verdicts and any(r in result.reason for r in reasons), (result.verdict, result.reason)
    honest = _judge("", repo, SANDBOXED)
    assert honest.verdict == "pass", honest.reason


# Where a worker is forked from the forkserver (evaluate.forked, on the CPU) rather than started by bwrap, its
# sandbox is made by the child itself (evaluate.worker.own_sandbox): three ways out that bwrap's own start never
# offered. Run against a build without its guard, the first two escaped: the forkserver's socket left open in the
# child, and .git uncovered with the second user namespace and the capability drop taken out. The init's memory is
# out of reach twice over (the worker has no capability in the init's user namespace, which the kernel's ptrace
# rule asks of a process in another; and the init is not dumpable): without the second guard it still failed.
FORKSERVER_SOCKET = '''
import socket, stat
for fd in os.listdir("/proc/self/fd"):
    try:
        is_socket = stat.S_ISSOCK(os.fstat(int(fd)).st_mode)
    except OSError:
        continue
    if is_socket and socket.socket(fileno=os.dup(int(fd))).type == socket.SOCK_SEQPACKET:
        raise RuntimeError(f"ESCAPED: the forkserver's socket at fd {fd}")
'''

UNCOVER_GIT = '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
git = {git!r}
libc.umount2(git.encode(), 0)
libc.umount2(git.encode(), 2)  # MNT_DETACH
child = os.fork()  # a new user namespace is refused to a threaded process: try it in a child of one thread
if child == 0:
    if libc.unshare(0x10000000 | 0x20000) == 0:  # CLONE_NEWUSER | CLONE_NEWNS: every capability, in there
        libc.umount2(git.encode(), 2)
    try:
        os._exit(7 if b"ghp_isolation_test_token" in open(git + "/config", "rb").read() else 0)
    except OSError:
        os._exit(0)
if os.waitpid(child, 0)[1] >> 8 == 7:
    raise RuntimeError("ESCAPED: .git uncovered in a user namespace of its own")
try:
    if b"ghp_isolation_test_token" in open(git + "/config", "rb").read():
        raise RuntimeError("ESCAPED: .git uncovered")
except OSError:
    pass
'''

INIT_MEMORY = '''
try:
    regions = [line.split()[0] for line in open("/proc/1/maps") if line.split()[1].startswith("rw")]
    with open("/proc/1/mem", "rb") as mem:
        start = int(regions[0].split("-")[0], 16)
        mem.seek(start)
        if mem.read(64):
            raise RuntimeError("ESCAPED: read the memory of the sandbox's init, which holds its mounts")
except (OSError, IndexError, ValueError):
    pass
'''


@pytest.mark.slow
def test_a_forked_worker_cannot_reach_the_forkserver_uncover_git_or_touch_its_init(repo: Path) -> None:
    for attack in (FORKSERVER_SOCKET, UNCOVER_GIT.format(git=str(repo / ".git")), INIT_MEMORY):
        result = _judge(attack, repo, SANDBOXED)
        assert result.verdict == "pass", result.reason
        assert result.details["phases"]["candidate_worker"]["boot"]["torch_import_s"] == 0.0  # it was forked
    # Unsandboxed, .git is simply there to read.
    assert _escaped(_judge(UNCOVER_GIT.format(git=str(repo / ".git")), repo, UNSANDBOXED))


# The kernel's keyrings are walled by no view: a red-team pass (twenty-ninth session) left a key in the bot's shared
# session keyring from one evaluation and read it from the next, bubblewrap's workers and forked ones alike. Every
# worker now fails the keyring system calls (evaluate.worker.syscall_filter; the attack works without it:
# tests/evaluate/test_syscall_filter.py), sandboxed or not.
KEYRING = '''
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
add_key = {"x86_64": 248, "aarch64": 217}.get(platform.machine(), -1)
if libc.syscall(add_key, b"user", b"kforge-planted", b"x", ctypes.c_size_t(1), ctypes.c_long(-3)) > 0:
    raise RuntimeError("ESCAPED: a key left in the session keyring for a later worker")
'''


@pytest.mark.slow
def test_a_candidate_cannot_leave_a_key_for_a_later_worker(repo: Path) -> None:
    for settings in (SANDBOXED, UNSANDBOXED):
        result = _judge(KEYRING, repo, settings)
        assert result.verdict == "pass", result.reason


# The sandbox's root and /dev were writable tmpfs mounts outside the scratch folder, unwatched (red team, twenty-ninth
# session): a way past the scratch limit. Read-only now, in bubblewrap's sandbox and in a forked worker's.
WRITE_ROOT = WRITE_OUTSIDE.format(targets=["/planted", "/dev/planted", "/usr/planted"])


@pytest.mark.slow
@pytest.mark.parametrize("forkserver", ["", "0"], ids=["forked", "bubblewrap"])
def test_a_candidate_cannot_write_the_sandboxs_own_root_or_dev(repo: Path, forkserver: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFORGE_FORKSERVER", forkserver)
    result = _judge(WRITE_ROOT, repo, SANDBOXED)
    assert result.verdict == "pass", result.reason


# The sandbox's init (pid 1) is the forked worker's parent: in the red team's pass a SIGINT to it raised Python's
# KeyboardInterrupt there and ended the worker's own sandbox (bwrap's init ignores it, as the kernel has a namespace's
# init ignore what it has no handler for). It only hurt the candidate, but the two paths should agree.
INTERRUPT_INIT = '''
os.kill(1, signal.SIGINT)
time.sleep(0.5)
'''


@pytest.mark.slow
def test_a_signal_to_the_sandboxs_init_changes_nothing(repo: Path) -> None:
    result = _judge(INTERRUPT_INIT, repo, SANDBOXED)
    assert result.verdict == "pass", result.reason
