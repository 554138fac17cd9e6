"""The cache-signing key lives in a signer process of its own (kforge_bot.config.signer): the bot, which reads
files a pull request names, never holds it (issue 38: "the signing secret is never readable by a process that
reads PR-named paths")."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.gate_repos import PACKAGE_ROOT, POLICY, REF, entry, init_repo
from fakes.gitrepos import commit_all, write

CANARY = "canary-signing-5d27"
# The head's kernel: its reference's inputs take a while, so the bot is caught mid-gate, reading the PR's files.
SLOW_REF = REF.replace("def make_inputs(n):\n", "def make_inputs(n):\n    import time\n    time.sleep(0.5)\n")
WRONG = "import torch\n\n\ndef kernel(x, y):\n    return x * 3.0 + y\n"


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        here = todo.pop()
        out.append(here)
        todo.extend(_children(here))
    return out


REFUSED = b"(refused)"


def _environ(pid: int) -> bytes | None:
    """What a file read of /proc/<pid>/environ gives this user: its bytes, REFUSED, or None (the process ended)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except PermissionError:
        return REFUSED
    except OSError:
        return None


@pytest.mark.slow
def test_the_bot_that_reads_pr_files_never_holds_the_signing_key(tmp_path: Path) -> None:
    """Attack: a read of `/proc/<bot>/environ` (the bot's own `/proc/self/environ`, where a hole in the reader or any
    file-reading bug lands) while `kforge-bot gate` reads a pull request's files. Before: the key the workflow set
    ($KFORGE_CACHE_SECRET) was there, whatever os.environ.pop did. Now no process of the bot's, read as the bot's
    own user, shows it; the signer that holds it refuses the read (not dumpable); and what the gate cached is still
    signed with that key."""
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", SLOW_REF)
    write(root, "k.py", REF.replace("def reference", "def kernel").split("def make_inputs")[0])
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("k", sizes=(32,)))
    write(root, "policy.yml", POLICY)
    commit_all(root, "base")
    write(root, "k.py", WRONG)
    commit_all(root, "head: a wrong kernel")
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(PYTHONPATH=os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p),
               KFORGE_CACHE_SECRET=CANARY, KFORGE_CACHE_DIR=str(cache), XDG_CONFIG_HOME=str(tmp_path / "config"))
    bot = subprocess.Popen([sys.executable, "-m", "kforge_bot.cli", "gate", "--base", "HEAD~1", "--policy",
                            "policy.yml"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen: dict[int, bytes | None] = {}
    try:
        deadline = time.monotonic() + 240
        while bot.poll() is None and time.monotonic() < deadline:
            tree = _tree(bot.pid)
            if len(tree) >= 3:  # the bot, its signer and a worker: the bot is mid-gate, past any start-up
                seen = {pid: _environ(pid) for pid in tree}
                break
            time.sleep(0.05)
        out, err = bot.communicate(timeout=600)
    finally:
        bot.kill()
    assert seen.get(bot.pid) is not None, "the bot's own environ could not be read: nothing was tested"
    leaked = [pid for pid, text in seen.items() if text is not None and CANARY.encode() in text]
    assert not leaked, f"the signing key shows in /proc/<pid>/environ of {leaked} (the bot is {bot.pid})"
    if os.geteuid() != 0:  # root reads any process; the bot's own user must not read its signer's
        assert REFUSED in seen.values(), f"no process of the bot's refused the read: {seen}"
    assert bot.returncode == 1, out.decode() + err.decode()  # the wrong kernel fails: the gate ran
    entries = [json.loads(p.read_text()) for p in cache.glob("*.json")]
    assert entries, "the gate cached nothing"
    for data in entries:  # signed with the workflow's key, by the signer
        mac = data.pop("mac")
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()
        assert hmac.compare_digest(mac, hmac.new(CANARY.encode(), blob, hashlib.sha256).hexdigest())
    assert not (tmp_path / "config" / "kforge-bot" / "cache-secret").exists()  # the given key, not a file's


def test_the_signer_signs_with_the_given_key_and_ends_with_the_bot(tmp_path: Path) -> None:
    """In a child process (the signer forks its own): the key leaves os.environ and /proc/self/environ, signatures
    match the key, and the signer ends when the bot's end closes."""
    code = f"""
import hashlib, hmac, os, time
from kforge_bot.config import signer
s = signer.start(lambda: b"from a file")
assert os.environ.get("KFORGE_CACHE_SECRET") is None
assert b"{CANARY}" not in open("/proc/self/environ", "rb").read()
assert signer.mac(b"abc", None) == hmac.new(b"{CANARY}", b"abc", hashlib.sha256).hexdigest()
assert signer.start(None) is s  # once per process
s._sock.close()
for _ in range(100):
    if os.waitpid(s.pid, os.WNOHANG)[0]:
        break
    time.sleep(0.05)
else:
    raise SystemExit("the signer outlived its socket")
print("ok")
"""
    env = {**os.environ, "KFORGE_CACHE_SECRET": CANARY,
           "PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_a_signer_that_was_killed_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """The signer killed (an OOM killer): the bot's next signature is a one-line KforgeError, never a silent miss."""
    code = """
import os, signal
from kforge_bot.config import signer
from kforge_bot.errors import KforgeError
s = signer.start(lambda: b"k")
os.kill(s.pid, signal.SIGKILL)
os.waitpid(s.pid, 0)
try:
    signer.mac(b"abc", None)
except KforgeError as exc:
    print("one line:", exc)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", ""))
                                                       if p)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, check=False)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "one line: " in proc.stdout and "has ended" in proc.stdout, said
