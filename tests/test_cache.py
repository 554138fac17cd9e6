"""The gate's result cache: local-import closure, content keys, the JSON store, and hits and misses in
real gate runs (a cached run measures nothing; a different target fingerprint misses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.gate_repos import cli, init_repo
from fakes.gitrepos import commit_all, write

import kforge_bot.cache as cache_module
from kforge_bot.cache import (
    ResultCache,
    cache_key,
    file_digests,
    portable,
)
from kforge_bot.config.policy import load_policy
from kforge_bot.gate.run import run_gate
from kforge_bot.machine.signing import machine_secret
from kforge_bot.kernelspec.dependencies import direct_dependencies, local_closure
from kforge_bot.targets.fingerprint import TargetFingerprint, probe_fingerprint


@pytest.fixture()
def tree(tmp_path):
    write(tmp_path, "kernel.py", "import torch\nimport numpy\nfrom pkg import util\nfrom pkg.sub import deep\n\n"
                                 "SOURCES = ['csrc/k.cu']\n\n\ndef f():\n    import lazyhelper\n    return lazyhelper\n")
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/util.py", "from . import inner\n")
    write(tmp_path, "pkg/inner.py", "X = 1\n")
    write(tmp_path, "pkg/sub/deep.py", "Y = 2\n")  # a namespace package: no __init__.py
    write(tmp_path, "lazyhelper.py", "import chain\n")
    write(tmp_path, "chain.py", "import broken_syntax\n")
    write(tmp_path, "broken_syntax.py", "def oops(:\n")
    write(tmp_path, "csrc/k.cu", "__global__ void k() {}\n")
    write(tmp_path, "unrelated.py", "import kernel\n")
    return tmp_path


def rel(paths, root):
    return sorted(p.relative_to(root.resolve()).as_posix() for p in paths)


def test_local_closure_follows_imports_transitively(tree):
    closure = local_closure([tree / "kernel.py"], [tree], tree)
    assert rel(closure, tree) == ["broken_syntax.py", "chain.py", "csrc/k.cu", "kernel.py", "lazyhelper.py",
                                  "pkg/__init__.py", "pkg/inner.py", "pkg/sub/deep.py", "pkg/util.py"]
    # torch and numpy are not files under the repository; unrelated.py imports the kernel, not the reverse.
    assert rel(direct_dependencies(tree / "pkg/util.py", [tree], tree), tree) == ["pkg/inner.py"]


def test_closure_stays_inside_the_repository(tree, tmp_path_factory):
    outside = tmp_path_factory.mktemp("site")
    write(outside, "extlib.py", "Z = 3\n")
    write(tree, "uses_ext.py", "import extlib\n")
    closure = local_closure([tree / "uses_ext.py"], [tree, outside], tree)
    assert rel(closure, tree) == ["uses_ext.py"]


def test_digests_and_portable_material(tree):
    before = file_digests([tree / "pkg/inner.py", tree / "gone.py"], tree)
    assert before["gone.py"] == "missing" and len(before["pkg/inner.py"]) == 64
    (tree / "pkg/inner.py").write_text("X = 2\n")
    assert file_digests([tree / "pkg/inner.py"], tree)["pkg/inner.py"] != before["pkg/inner.py"]
    data = {"root": "/tmp/wt-1/tree", "reference": {"source": "abc", "symbol": "f", "root": "/tmp/x"}, "shapes": [1]}
    assert portable(data) == {"reference": {"source": cache_module.text_digest("abc"), "symbol": "f"}, "shapes": [1]}
    # Two checkouts of the same content in different places give the same material.
    assert portable({**data, "root": "/elsewhere"}) == portable(data)


def test_key_depends_on_every_part(monkeypatch):
    fp = TargetFingerprint("cuda", "NVIDIA H200", "2.13.0")
    material = {"kernel": "k", "head": {"files": {"k.py": "1"}}, "target": fp.to_dict()}
    key = cache_key(material)
    assert key == cache_key(json.loads(json.dumps(material)))  # canonical: order and round trips do not matter
    assert cache_key({**material, "target": TargetFingerprint("cuda", "NVIDIA B200", "2.13.0").to_dict()}) != key
    assert cache_key({**material, "target": TargetFingerprint("cuda", "NVIDIA H200", "2.14.0").to_dict()}) != key
    assert cache_key({**material, "head": {"files": {"k.py": "2"}}}) != key
    monkeypatch.setattr(cache_module, "HARNESS_VERSION", "999")
    assert cache_key(material) != key


def test_store_round_trip_and_bad_entries(tmp_path):
    store = ResultCache(tmp_path / "c")
    assert store.get("k1") is None and len(store) == 0
    path = store.put("k1", {"m": 1}, {"verdict": "pass"})
    assert store.get("k1") == {"verdict": "pass"} and len(store) == 1
    assert (tmp_path / "c" / ".gitignore").read_text().strip().endswith("*")
    assert not list((tmp_path / "c").glob(".tmp-*"))  # written through a temporary file, renamed
    path.write_text("{not json")
    assert store.get("k1") is None
    path.write_text(json.dumps({"key": "other", "harness_version": cache_module.HARNESS_VERSION, "result": {}}))
    assert store.get("k1") is None
    path.write_text(json.dumps({"key": "k1", "harness_version": "0", "result": {"verdict": "pass"}}))
    assert store.get("k1") is None


def test_entries_are_signed_and_a_forged_or_foreign_entry_is_a_reported_miss(tmp_path):
    store = ResultCache(tmp_path / "c", secret=b"this machine")
    path = store.put("k1", {"m": 1}, {"verdict": "regression", "speedup": 0.5})
    record = json.loads(path.read_text())
    assert len(record["mac"]) == 64
    # A worker (or a PR's workflow step) rewrites the verdict, keeping key and harness version: refused.
    record["result"] = {"verdict": "improved", "speedup": 1.8}
    path.write_text(json.dumps(record))
    assert store.get("k1") is None and store.rejected == [str(path)]
    # An entry without a signature, or one signed on another machine, is refused the same way.
    record.pop("mac")
    path.write_text(json.dumps(record))
    assert store.get("k1") is None and len(store.rejected) == 2
    ResultCache(tmp_path / "c", secret=b"another machine").put("k1", {"m": 1}, {"verdict": "pass"})
    assert store.get("k1") is None and len(store.rejected) == 3
    # What this machine's bot writes verifies.
    store.put("k1", {"m": 1}, {"verdict": "pass"})
    assert store.get("k1") == {"verdict": "pass"} and len(store.rejected) == 3


def test_the_machine_secret_is_made_once_private_and_reused(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    first = machine_secret(env)
    path = tmp_path / "kforge-bot" / "cache-secret"
    assert len(first) == 32 and path.stat().st_mode & 0o777 == 0o600
    assert machine_secret(env) == first
    assert machine_secret({**env, "KFORGE_CACHE_SECRET": "set"}) == b"set"


def test_cpu_fingerprint_names_the_machine():
    fp = probe_fingerprint("cpu")
    assert fp.kind == "cpu" and fp.device_name and fp.torch_version[0].isdigit()


# ------------------------------------------------------------------------------- real gate runs


REF = "import torch\n\n\ndef make_inputs(n):\n    return torch.randn(n, n), torch.randn(n, n)\n"
KERNEL = "def kernel(x, y):\n    return x * 2.0 + y\n"
FRESH = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return 2.0 * torch.sigmoid(2.0 * x) - 1.0


def get_inputs():
    return [torch.randn(128, 128)]


def get_init_inputs():
    return []
"""
MANIFEST = """\
version: 1
kernels:
  k:
    file: k.py
    entry: kernel
    inputs: ref.py:make_inputs
    shapes: [{n: 128}]
    targets: [cpu]
"""
POLICY = "version: 1\ngate: {threshold: 0.5}\nevaluation: {seeds: 2, timing_budget_s: 1.0, timeout_s: 120}\n"


def gate_cli(root: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = cli("gate", *args, cwd=root)
    return proc, time.monotonic() - started


@pytest.mark.slow
def test_second_gate_run_is_all_cache_hits_and_another_device_misses(tmp_path, monkeypatch):
    # The gate's default cache: the user's cache folder ($XDG_CACHE_HOME/kforge-bot), never the checkout.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KFORGE_CACHE_DIR", raising=False)
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "k.py", KERNEL)
    write(root, "kforge.yaml", MANIFEST)
    write(root, "policy.yml", POLICY)
    commit_all(root, "base")
    # An equivalent rewrite of a kernel that is its own reference (checked against its base version),
    # and a new KernelBench problem with its own ModelNew (checked against Model only).
    write(root, "k.py", "def kernel(x, y):\n    return y + 2.0 * x\n")
    write(root, "problems/fresh.py", FRESH)
    commit_all(root, "head")

    args = ("--base", "HEAD~1", "--policy", "policy.yml", "--json", "-")
    first, _ = gate_cli(root, *args)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    kernels = {k["id"]: k for k in report["kernels"]}
    assert set(kernels) == {"k", "problems/fresh.py"}
    assert kernels["k"]["verdict"] == "pass" and kernels["k"]["speedup_ci"] is not None
    assert kernels["problems/fresh.py"]["verdict"] == "pass" and kernels["problems/fresh.py"]["new"]
    assert not any(k["cached"] for k in kernels.values())
    cache_dir = tmp_path / "xdg" / "kforge-bot"
    assert len(ResultCache(cache_dir)) == 2
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, check=False, capture_output=True,
                          text=True).stdout == ""  # nothing written into the checkout

    second, _ = gate_cli(root, *args)
    assert second.returncode == 0, second.stderr
    again = {k["id"]: k for k in json.loads(second.stdout)["kernels"]}
    assert all(k["cached"] and not k["measured"] for k in again.values())
    assert {k: v["verdict"] for k, v in again.items()} == {k: v["verdict"] for k, v in kernels.items()}
    assert len(ResultCache(cache_dir)) == 2  # nothing was measured, so nothing new was stored

    policy = load_policy(root / "policy.yml")
    here = {"cpu": probe_fingerprint("cpu")}
    plan = run_gate(root, "HEAD~1", policy=policy, fingerprints=here, measure=False)
    assert all(k.cached for k in plan.kernels)
    other = {"cpu": TargetFingerprint("cpu", "A Different CPU", here["cpu"].torch_version)}
    plan = run_gate(root, "HEAD~1", policy=policy, fingerprints=other, measure=False)
    assert not any(k.cached for k in plan.kernels)
    plan = run_gate(root, "HEAD~1", policy=policy, fingerprints=here, measure=False, use_cache=False)
    assert not any(k.cached for k in plan.kernels)
    # $KFORGE_CACHE_DIR, which optimize reads, is the gate's cache too: an empty one there means misses.
    elsewhere = root.parent / "elsewhere-cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KFORGE_CACHE_DIR", str(elsewhere))
        plan = run_gate(root, "HEAD~1", policy=policy, fingerprints=here, measure=False)
    assert not any(k.cached for k in plan.kernels)  # the default folder would have hit


# ------------------------------------------------------------------------------- optimize's evaluations


DOUBLE = "import torch\n\n\ndef double(x):\n    return x * 2.0\n\n\ndef reference(x):\n    return x + x\n\n\n" \
         "def make_inputs(n):\n    return [torch.randn(n)]\n"
DOUBLE_MANIFEST = ("version: 1\nkernels:\n  double:\n    file: double.py\n    entry: double\n"
                   "    reference: double.py:reference\n    inputs: double.py:make_inputs\n    shapes:\n"
                   "      - {n: 4096}\n    targets: [cpu]\n    seeds: 2\n")


@pytest.mark.slow
def test_evaluator_cache_is_separated_by_hardware_and_never_stores_a_cached_result(tmp_path):
    from kforge_bot.evaluate.api import evaluate
    from kforge_bot.evaluate.wire.result import EvalSettings
    from kforge_bot.optimize.evaluator import HarnessEvaluator
    from kforge_bot.kernelspec import load_spec

    write(tmp_path / "k", "double.py", DOUBLE)
    write(tmp_path / "k", "kforge.yaml", DOUBLE_MANIFEST)
    spec = load_spec(tmp_path / "k" / "kforge.yaml")
    candidate = spec.candidate_from_source(DOUBLE.replace("return x * 2.0", "return 2.0 * x"))
    crashing = spec.candidate_from_source(DOUBLE.replace("    return x * 2.0\n", "    import ctypes\n"
                                                         "    ctypes.string_at(0)\n"))  # a real SIGSEGV
    settings = EvalSettings(seeds=2, timing_budget_s=0.3, min_pairs=10, profile=False, timeout_s=60)
    store = ResultCache(tmp_path / "cache")
    calls = []

    def measured(*args, **kwargs):  # the real evaluate, counted
        calls.append(args[1].source)
        return evaluate(*args, **kwargs)

    made = []

    def evaluator(fingerprint, evaluate_fn=measured):
        made.append(HarnessEvaluator(spec, "cpu", settings, evaluate_fn=evaluate_fn, cache=store, fingerprint=fingerprint,
                              seeds=[5, 6]))
        if len(made) > 1:
            made[-1].session.references = made[0].session.references  # the reference's outputs once (seeds are not in the key)
        return made[-1]

    machine_a = TargetFingerprint("cpu", "Test CPU A", "2.13.0")
    machine_b = TargetFingerprint("cpu", "Test CPU B", "2.13.0")
    first = evaluator(machine_a)
    result, seconds = first(candidate)
    assert result.verdict == "pass" and not result.cached and seconds > 0 and result.baseline is not None
    assert (first.hits, first.misses, len(calls), len(store)) == (0, 1, 1, 1)

    # The same hardware in a later session (other seeds): a hit, marked, measured nothing.
    again = evaluator(TargetFingerprint("cpu", "Test CPU A", "2.13.0"))
    hit, seconds = again(candidate)
    assert hit.cached and seconds == 0.0 and len(calls) == 1 and (again.hits, again.misses) == (1, 0)
    assert hit.verdict == "pass" and hit.speedup == result.speedup
    assert hit.baseline.median_ms == result.baseline.median_ms
    key_a = hit.details["cache_key"]
    assert store.get(key_a)["cached"] is False and len(store) == 1

    # Other hardware: a miss, measured again, stored under its own key next to the first.
    other = evaluator(machine_b)
    remeasured, seconds = other(candidate)
    assert not remeasured.cached and seconds > 0 and len(calls) == 2 and (other.hits, other.misses) == (0, 1)
    assert len(store) == 2
    materials = {p.stem: json.loads(p.read_text())["material"]["target"] for p in store.directory.glob("*.json")}
    assert materials[key_a] == machine_a.to_dict()
    key_b = next(k for k in materials if k != key_a)
    assert materials[key_b] == machine_b.to_dict()
    fields = ("median_ms", "q1_ms", "q3_ms", "min_ms", "samples")
    stats = [tuple(r["baseline"][f] for f in fields) for r in (store.get(key_b), remeasured.to_dict(), result.to_dict())]
    assert stats[0] == stats[1] != stats[2]  # B's entry holds B's own measurement, not A's

    # A result that came out of the cache (carried along, say, in a resumed trajectory) is never written
    # under another machine's key.
    carried = evaluator(TargetFingerprint("cpu", "Test CPU C", "2.13.0"), evaluate_fn=lambda *a, **k: hit)
    reused, _ = carried(candidate)
    assert reused.cached and carried.misses == 1 and len(store) == 2

    # A crash may be the machine's fault: not cached, so the next evaluation measures it again.
    crash, _ = first(crashing)
    assert crash.verdict == "crash" and "SIGSEGV" in crash.reason and not crash.cached
    assert len(calls) == 3 and len(store) == 2 and first.misses == 2
    made[0].close()


def test_a_src_layout_kernels_key_does_not_depend_on_where_the_checkout_is(tmp_path: Path) -> None:
    """Import roots are absolute paths in the worker's view: the key keeps the manifest's relative ones only."""
    import shutil

    from kforge_bot.kernelspec import load_manifest

    library = Path(__file__).parent / "data" / "library_repo"
    keys = []
    for where in ("a", "b"):
        shutil.copytree(library, tmp_path / where)
        spec = load_manifest(tmp_path / where / "kforge.yaml")["swiglu"]
        keys.append(json.dumps(portable(spec.to_dict()), sort_keys=True))
    assert keys[0] == keys[1] and '"import_roots": ["src"]' in keys[0]


def test_one_cache_folder_named_by_one_variable(tmp_path: Path) -> None:
    """KFORGE_CACHE_DIR decides the folder of every cache (results, doctor's ceilings); without it, the gate's
    repository folder or ~/.cache/kforge-bot."""
    from kforge_bot import hardware
    from kforge_bot.machine.cache_dirs import user_cache_dir

    mine = tmp_path / "mine"
    assert user_cache_dir({"KFORGE_CACHE_DIR": str(mine)}) == mine
    assert user_cache_dir({"KFORGE_CACHE_DIR": str(mine)}, unset=tmp_path / "repo") == mine
    assert user_cache_dir({}, unset=tmp_path / "repo") == tmp_path / "repo"
    assert user_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "kforge-bot"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KFORGE_CACHE_DIR", str(mine))
        assert hardware.ceilings_path("cuda", "NVIDIA H200") == mine / "ceilings" / "cuda-nvidia-h200.json"


def test_a_signed_entry_replayed_under_another_key_is_a_miss(tmp_path):
    """Red-team pass, already blocked: a pull request's workflow step that can plant files in a restored cache
    folder copies a genuine, signed "pass" (measured for another kernel or revision) under the key its own change
    will look up. The signature covers the key inside the record, and `get` compares it with the key asked for: a
    miss. (Fails if that comparison is removed: the signature alone verifies.)"""
    store = ResultCache(tmp_path / "c", secret=b"this machine")
    genuine = store.put("key-of-the-base", {"m": 1}, {"verdict": "pass"})
    (tmp_path / "c" / "key-of-the-head.json").write_text(genuine.read_text())
    assert store.get("key-of-the-base") == {"verdict": "pass"}
    assert store.get("key-of-the-head") is None


def _get_in_a_child(folder: Path, key: str, memory: int = 1 << 30) -> subprocess.CompletedProcess:
    """`ResultCache(folder).get(key)` in a child under a memory limit and a timeout (old code read /dev/zero until
    the machine ran out of memory, and waited on a FIFO for ever)."""
    code = ("import resource, sys\n"
            f"resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))\n"
            "from kforge_bot.cache import ResultCache\n"
            f"print(ResultCache({str(folder)!r}, secret=b'k').get({key!r}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]),
                                                                 os.environ.get("PYTHONPATH", "")) if p)}
    try:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, -1, "", "timed out: waited on the planted file")


@pytest.mark.parametrize("planted", ["/dev/zero link", "fifo", "link out of the folder"])
def test_a_planted_entry_is_a_miss_never_read_or_waited_on(tmp_path, planted):
    """Red-team pass: a file planted in a restored cache folder under an entry's name, as a link to /dev/zero (the
    gate read until it ran out of memory), a FIFO (the gate waited for ever) or a link to a file elsewhere: each is
    a miss, read through the reader (regular files inside the folder, size-capped, opened without blocking)."""
    folder = tmp_path / "c"
    folder.mkdir()
    entry = folder / "k1.json"
    if planted == "/dev/zero link":
        entry.symlink_to("/dev/zero")
    elif planted == "fifo":
        os.mkfifo(entry)
    else:
        ResultCache(tmp_path / "elsewhere", secret=b"k").put("k1", {}, {"verdict": "pass"})
        entry.symlink_to(tmp_path / "elsewhere" / "k1.json")
    proc = _get_in_a_child(folder, "k1")
    assert proc.returncode == 0 and proc.stdout.strip() == "None", proc.stdout + proc.stderr


def test_a_planted_gitignore_link_is_not_followed(tmp_path):
    """Red-team pass: the cache writes a `.gitignore` into its folder when there is none; a dangling link planted
    under that name was followed, and the file made wherever it pointed (outside the folder). Now the link is left
    as it is and nothing is made through it."""
    folder = tmp_path / "c"
    folder.mkdir()
    target = tmp_path / "outside" / "made-by-the-cache"
    target.parent.mkdir()
    (folder / ".gitignore").symlink_to(target)
    ResultCache(folder, secret=b"k").put("k1", {}, {"verdict": "pass"})
    assert not target.exists(), "the cache wrote through a planted link"
    assert ResultCache(folder, secret=b"k").get("k1") == {"verdict": "pass"}


def test_the_removed_cache_variable_is_a_one_line_error_naming_the_new_one(tmp_path: Path) -> None:
    """KFORGE_BOT_CACHE_DIR was an earlier name of KFORGE_CACHE_DIR: nothing was released with it, so it is no
    longer read, and set it stops every cache folder's reading with one line that names the variable to use."""
    from kforge_bot.errors import KforgeError
    from kforge_bot.machine.cache_dirs import bytecode_dir, ceilings_dir, user_cache_dir

    old = {"KFORGE_BOT_CACHE_DIR": str(tmp_path / "old"), "KFORGE_CACHE_DIR": str(tmp_path / "new")}
    for where in (user_cache_dir, ceilings_dir, bytecode_dir):
        with pytest.raises(KforgeError) as info:
            where(old)
        assert "KFORGE_BOT_CACHE_DIR is no longer read" in str(info.value) and "\n" not in str(info.value)
        assert "set KFORGE_CACHE_DIR instead" in info.value.hint


def test_the_bytecode_cache_stays_outside_the_shared_cache_folder(tmp_path: Path) -> None:
    """The workers' bytecode runs in the bot: it never follows KFORGE_CACHE_DIR (a folder an Actions cache restores,
    or a checkout)."""
    from kforge_bot.machine.cache_dirs import bytecode_dir, ceilings_dir

    env = {"XDG_CACHE_HOME": str(tmp_path), "KFORGE_CACHE_DIR": str(tmp_path / "shared")}
    assert bytecode_dir(env) == tmp_path / "kforge-bot-bytecode"
    assert ceilings_dir(env) == tmp_path / "shared" / "ceilings"
    assert bytecode_dir({**env, "KFORGE_BYTECODE_DIR": str(tmp_path / "mine")}) == tmp_path / "mine"
