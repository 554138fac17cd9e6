"""The one reader of files a pull request controls (kforge_bot.config.reader), and the wall around it: no other
module of the package opens a file, parses YAML or reads a path's text, except those listed below, each for a file
the bot or the runner wrote (never one a pull request names)."""

from __future__ import annotations

import ast
import functools
import os
import threading
from pathlib import Path

import pytest

from kforge_bot.config import reader
from kforge_bot.errors import KforgeError

PACKAGE = Path(__file__).resolve().parents[2] / "kforge_bot"

# The calls that open or read a file by its path, or parse YAML: on a name (`open`), or as a method of anything
# (`path.read_text()`, `os.open`, `yaml.safe_load`, `tarfile.open`).
_OPENING_NAMES = {"open", "read_text", "read_bytes", "fdopen"}
_YAML_LOADS = {"load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all"}
_COPIES = {"copy", "copy2", "copyfile", "copytree"}  # shutil's: they read what they copy
# Calls that read or run a file by its path without `open` in their name: on a name, or (name, receiver) pairs.
_READING_NAMES = {"getline", "getlines", "ZipFile", "run_path", "spec_from_file_location"}
_READING_METHODS = {("load", "torch"), ("load", "np"), ("load", "numpy"), ("parse", "ET"), ("parse", "ElementTree"),
                    ("input", "fileinput")}

# (module, the call as written) -> why it reads no file a pull request controls.
ALLOWED: dict[tuple[str, str], str] = {
    ("kforge_bot.config.reader", "os.open"): "the reader itself",
    ("kforge_bot.config.reader", "os.fdopen"): "the reader itself",
    ("kforge_bot.config.reader", "read_bytes"): "the reader itself",
    ("kforge_bot.config.reader", "read_text"): "the reader itself",
    ("kforge_bot.config.yamlcheck", "yaml.load"): "parses text the reader (or git, for the base's policy) gave it",
    ("kforge_bot.doctor.report", "out.read_text"): "the JSON a doctor probe wrote into its own temporary folder",
    ("kforge_bot.evaluate.worker.entry", "open"): "/proc/meminfo, inside the worker's sandbox",
    ("kforge_bot.evaluate.wire.activity", "open"): "/proc/<pid> files of the worker processes the bot started",
    ("kforge_bot.evaluate.wire.timing", "conditions.NvmlClocks.open"): "NVML's handle to the GPU: no file",
    ("kforge_bot.evaluate.worker.sample_server", "conditions.NvmlClocks.open"): "NVML's handle to the GPU: no file",
    ("kforge_bot.evaluate.forked", "os.fdopen"): "the write end of a pipe the bot made for its forked worker's stdin",
    ("kforge_bot.evaluate.worker.forkserver", "os.fdopen"): "the read end of a pipe the forkserver made for its probe",
    ("kforge_bot.evaluate.worker.own_sandbox", "open"):
        "/proc/self/uid_map, gid_map and setgroups of the process making its own sandbox (written, not read)",
    ("kforge_bot.evaluate.worker.own_sandbox", "os.open"):
        "creates an empty file in the new root's own tmpfs as a mount point for a bound file (written, not read)",
    ("kforge_bot.evaluate.turns", "open"): "/proc/PID/task/TID/children and stat of the bot's own worker processes",
    ("kforge_bot.evaluate.bytecode", "(directory / 'primed.json').read_text"):
        "the bot's own bytecode cache folder (outside any checkout)",
    ("kforge_bot.evaluate.bytecode", "os.open"): "the lock file of the bot's own bytecode cache folder",
    ("kforge_bot.evaluate.bytecode", "os.fdopen"): "a temporary file the bot made in its bytecode cache folder",
    ("kforge_bot.evaluate.scratch", "os.open"): "the sandbox's own scratch folders, walked without following links",
    ("kforge_bot.evaluate.wire.tensorfile", "os.open"): "tensors a worker wrote into its own scratch (O_NOFOLLOW)",
    ("kforge_bot.agents.generator", "resources.files('kforge_bot.agents').joinpath('prompts', name).read_text"):
        "the package's own prompt files",
    ("kforge_bot.gitops", "tarfile.open"): "the stream `git archive` writes (the tree, not a path the tree names)",
    ("kforge_bot.counters.unitrace", "Path(path).read_text"): "unitrace's output files in the profiler's scratch",
    ("kforge_bot.counters.unitrace", "path.read_text"): "unitrace's output files in the profiler's scratch",
    ("kforge_bot.counters.profiled_run", "os.open"): "the profiler's report in its own scratch (O_NOFOLLOW)",
    ("kforge_bot.counters.profiled_worker", "request_path.read_text"): "the request the bot wrote for the profiler",
    ("kforge_bot.counters.profiled_worker", "os.open"): "the profiler's log file in its own scratch",
    ("kforge_bot.targets", "Path('/proc/cpuinfo').read_text"): "the host's CPU model",
    ("kforge_bot.scaleout.orphans", "open"): "/proc/<pid>/environ of processes the bot started (its own marker)",
    ("kforge_bot.scaleout.compile_ahead", "os.open"): "the compile-ahead build folders the bot made",
    ("kforge_bot.prbot.results", "path.read_text"): "the PR bot's own results files",
    ("kforge_bot.prbot.results", "open"): "the PR bot's own results files (appended)",
    ("kforge_bot.github.events", "p.read_text"): "the event payload the Actions runner wrote ($GITHUB_EVENT_PATH)",
    ("kforge_bot.machine.signing", "path.read_text"): "the cache-signing key in ~/.config/kforge-bot",
    ("kforge_bot.machine.signing", "os.fdopen"): "the cache-signing key, written new in ~/.config/kforge-bot",
    ("kforge_bot.cache", "os.fdopen"): "a temporary file the cache made",
    ("kforge_bot.cache", "os.open"): "the cache folder's .gitignore, made new (O_EXCL, O_NOFOLLOW)",
    ("kforge_bot.hardware", "p.read_text"): "a ceilings file the user passes (doctor --save wrote it)",
    ("kforge_bot.optimize.trajectory", "open"): "the optimize run's own report folder (appended)",
    ("kforge_bot.optimize.trajectory", "path.read_text"): "the optimize run's own report folder",
    ("kforge_bot.gate.publish", "open"): "$GITHUB_STEP_SUMMARY, appended",
    ("kforge_bot.evaluate.worker.importing", "importlib.util.spec_from_file_location"):
        "a kernel's module imported in its sandboxed worker, never in the bot",
    ("kforge_bot.workloads.worker", "importlib.util.spec_from_file_location"):
        "a workload's module imported in its sandboxed worker, never in the bot",
    ("kforge_bot.evaluate.worker.importing", "shutil.copytree"):
        "compile-ahead builds the bot made, copied in the worker",
    ("kforge_bot.counters.ncu", "shutil.copy"): "the profiler's report from its own scratch",
    ("kforge_bot.evaluate.shipping", "shutil.copyfile"):
        "a file the reference's worker recorded, into a head's inbox where no hard link reaches (shipped inputs)",
    ("kforge_bot.evaluate.shipping", "why.read_text"):
        "the reference's worker's own word on a value it could not record (shipped inputs)",
    ("kforge_bot.evaluate.shipping", "torch.load"):
        "a skeleton the reference's worker recorded (no PR's file), read with weights_only to write its value whole",
    ("kforge_bot.evaluate.worker.shipped_inputs", "torch.load"):
        "a file the reference's worker recorded, in the worker's read-only inbox, read with weights_only",
}


def opening_calls(path: Path) -> list[str]:
    """Every call in a module that opens or reads a file by its path, or parses YAML, as written."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        receiver = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        if name in _OPENING_NAMES or name in _READING_NAMES or (name, receiver) in _READING_METHODS or (
                name in _YAML_LOADS and receiver == "yaml") or (name in _COPIES and receiver == "shutil"):
            if isinstance(func, ast.Attribute) and name == "open" and receiver[:1].isupper() and "(" not in receiver:
                continue  # a class's own constructor named `open` (OptimizeRun.open): no file by that call
            if receiver == "reader":
                continue  # the reader's own functions: the one way in
            found.append(ast.unparse(func))
    return found


def _module(path: Path) -> str:
    return ".".join(("kforge_bot", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


@functools.lru_cache(maxsize=1)
def _package_calls() -> frozenset[tuple[str, str]]:
    # Every (module, call) that opens a file in the package: walked once for the two tests below.
    return frozenset((_module(p), call) for p in PACKAGE.rglob("*.py") for call in opening_calls(p))


def test_no_module_but_the_reader_opens_files_a_pull_request_names() -> None:
    outside = sorted({f"{module}: {call}" for module, call in _package_calls() if (module, call) not in ALLOWED})
    assert not outside, "read through kforge_bot.config.reader, or list why it is no PR's file:\n" + "\n".join(outside)


def test_every_allowed_call_still_exists() -> None:
    """An exception that no longer matches a call is dropped, so the list stays the list of what is read."""
    present = _package_calls()
    assert not set(ALLOWED) - present, sorted(set(ALLOWED) - present)


def test_the_rule_sees_every_way_to_open_a_file(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("import yaml\nfrom pathlib import Path\n\n"
                      "def f(folder, name):\n"
                      "    a = Path(folder, name).read_text()\n"
                      "    b = yaml.safe_load(open(folder / name))\n"
                      "    c = (folder / name).read_bytes()\n"
                      "    d = OptimizeRun.open(folder), reader.read_text(folder / name, folder)\n"
                      "    shutil.copy(folder / name, '/tmp')\n"
                      "    with (folder / name).open() as handle:\n"
                      "        return a, b, c, d, handle\n")
    assert sorted(opening_calls(sample)) == sorted(["Path(folder, name).read_text", "yaml.safe_load", "open",
                                                    "(folder / name).read_bytes", "(folder / name).open",
                                                    "shutil.copy"])


# --------------------------------------------------------------------------------------- the reader's rules


def test_a_path_out_of_the_checkout_is_refused_by_dots_or_by_link(tmp_path: Path) -> None:
    checkout = tmp_path / "repo"
    (checkout / "p").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("secret")
    (checkout / "p" / "link.txt").symlink_to(tmp_path / "outside.txt")
    (checkout / "p" / "env").symlink_to("/proc/self/environ")
    for name in ("../../outside.txt", "link.txt", "env", "../../../../../proc/self/environ"):
        with pytest.raises(KforgeError, match="resolves outside the checkout"):
            reader.read_text(checkout / "p" / name, checkout)
    (checkout / "p" / "ok.txt").write_text("fine")
    assert reader.read_text(checkout / "p" / ".." / "p" / "ok.txt", checkout) == "fine"


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    """A device, a FIFO and a folder are refused from the open file's own type; a FIFO without a writer does not
    hang the reader (without a boundary, as for a file the user passes)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done: list[str] = []

    def attempt() -> None:
        for path in (Path("/dev/zero"), fifo, tmp_path):
            with pytest.raises(KforgeError, match="not a regular file|cannot read"):
                reader.read_text(path)
            done.append(str(path))

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(10)
    assert len(done) == 3, f"the reader hung or read one of them: {done}"
    assert not reader.is_regular_file(fifo) and not reader.is_regular_file("/dev/zero")


def test_sizes_are_capped_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * 101)
    with pytest.raises(KforgeError, match="too large"):
        reader.read_text(big, tmp_path, limit=100)
    assert reader.read_text(big, tmp_path, limit=101) == "#" * 101
    with pytest.raises(KforgeError, match="too large"):
        reader.sha256(big, tmp_path, limit=100)


def test_yaml_goes_through_the_strict_loader(tmp_path: Path) -> None:
    task = tmp_path / "task.yml"
    task.write_text("a: &x [1, 2]\nb: *x\n")
    with pytest.raises(KforgeError, match="anchors"):
        reader.read_yaml(task, tmp_path)


def test_safe_names_render_nothing_but_themselves() -> None:
    for good in ("vectoradd_py", "amd-fp8.mm", "a1"):
        assert reader.is_safe_name(good)
    for bad in ("[x](https://e.com)", "![i](https://e.com/i.png)", "@octocat", "a b", "..", ".hidden", "", "a" * 65,
                "x\n::error::y", "`code`"):
        assert not reader.is_safe_name(bad), bad
    assert reader.is_safe_path("problems/pmpp/vectoradd_py") and not reader.is_safe_path("a/../b")
    assert not reader.is_safe_path("problems/@octocat")


# ------------------------------------------------------------------------- red-team pass (issue 38, second pass)

GIT_CANARY = "canary-git-3e91"
# A new GPU MODE problem whose reference hands back, as its error, what the bot wrote beside it as `leak.py`.
_LEAKING_REFERENCE = '''\
import pathlib

import torch

LEAKED = (pathlib.Path(__file__).parent / "leak.py").read_text(errors="replace")


def generate_input(size: int, seed: int):
    return torch.ones(size)


def ref_kernel(data):
    raise RuntimeError("leaked: " + " ".join(LEAKED.split()))
'''
_LEAKING_TASK = ('files:\n  - {"name": "submission.py", "source": "@SUBMISSION@"}\n'
                 '  - {"name": "leak.py", "source": "../.git/config"}\n'
                 'lang: "py"\ntests:\n  - {"size": 8, "seed": 1}\n')


def test_nothing_in_the_checkouts_git_folder_is_read(tmp_path: Path) -> None:
    """`.git` lies inside the checkout, and actions/checkout leaves the token's Authorization header in its config:
    a path that resolves into it (by name, by `../`, by a committed link) is refused like one out of the checkout."""
    checkout = tmp_path / "repo"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text(f"extraheader = AUTHORIZATION: basic {GIT_CANARY}\n")
    (checkout / "p").mkdir()
    (checkout / "p" / "cfg").symlink_to("../.git/config")
    for name in (".git/config", "p/../.git/config", "p/cfg"):
        with pytest.raises(KforgeError, match=r"git's own folder"):
            reader.read_text(checkout / name, checkout)
    (checkout / "p" / "git.txt").write_text("a file named like git is still a file")
    assert reader.read_text(checkout / "p" / "git.txt", checkout).startswith("a file")


def test_a_task_files_entry_cannot_hand_the_checkouts_git_config_to_pr_code(tmp_path: Path) -> None:
    """`kforge-bot check` on a pull request's checkout (as a workflow runs it after actions/checkout): a task.yml
    `files:` entry naming `../.git/config` was read on the host and written beside the problem's code, which
    printed the credential header as its error. Now it is one line naming the key, and nothing of the config shows."""
    import subprocess
    import sys

    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "http.https://github.com/.extraheader",
                    f"AUTHORIZATION: basic {GIT_CANARY}"], check=True)
    problem = root / "leak_py"
    problem.mkdir()
    (problem / "reference.py").write_text(_LEAKING_REFERENCE)
    (problem / "submission.py").write_text("def custom_kernel(data):\n    return data\n")
    (problem / "task.yml").write_text(_LEAKING_TASK)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE.parent), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "kforge_bot.cli", "check", "leak_py", "--target", "cpu"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert GIT_CANARY not in proc.stdout + proc.stderr, "the checkout's git config reached the problem's code"
    assert proc.returncode == 2 and "files[1].source" in proc.stderr and "git's own folder" in proc.stderr, \
        proc.stdout + proc.stderr


def test_a_committed_link_loop_is_a_one_line_error_not_a_crash(tmp_path: Path) -> None:
    """Red-team pass: `Path.resolve()` raises RuntimeError on a link loop (Python 3.11), so a committed `a -> b -> a`
    named by a manifest, a task.yml or found by discovery crashed the bot with a traceback naming the runner's
    temporary checkout. The reader resolves with `real_path` and the open fails in one line."""
    checkout = tmp_path / "repo"
    checkout.mkdir()
    (checkout / "a.py").symlink_to("b.py")
    (checkout / "b.py").symlink_to("a.py")
    (checkout / "self.py").symlink_to("self.py")
    for name in ("a.py", "self.py"):
        assert reader.real_path(checkout / name).is_relative_to(checkout)
        with pytest.raises(KforgeError, match="cannot read"):
            reader.read_text(checkout / name, checkout)
        assert not reader.is_regular_file(checkout / name, checkout)


def test_the_rule_sees_the_calls_that_read_or_run_a_file_without_open(tmp_path: Path) -> None:
    """Red-team pass on the wall test itself: a module could read a pull request's file without any spelling the rule
    knew (`torch.load(path)`, `np.load(path)`, `linecache.getlines(path)`, `zipfile.ZipFile(path)`,
    `ElementTree.parse(path)`, `runpy.run_path(path)`, an import from a file by its path) and pass the wall. The
    rule names them now; the package's two imports by path run in the sandboxed workers and are listed."""
    sample = tmp_path / "y.py"
    sample.write_text("def f(path):\n"
                      "    a = torch.load(path), np.load(path), numpy.load(path)\n"
                      "    b = linecache.getlines(path), linecache.getline(path, 1)\n"
                      "    c = zipfile.ZipFile(path), ET.parse(path), ElementTree.parse(path)\n"
                      "    d = runpy.run_path(path), importlib.util.spec_from_file_location('m', path)\n"
                      "    e = fileinput.input(path)\n"
                      "    return json.load(handle), ast.parse(text), a, b, c, d, e\n")
    assert sorted(opening_calls(sample)) == sorted([
        "torch.load", "np.load", "numpy.load", "linecache.getlines", "linecache.getline", "zipfile.ZipFile",
        "ET.parse", "ElementTree.parse", "runpy.run_path", "importlib.util.spec_from_file_location",
        "fileinput.input"])
