"""`kforge-bot precommit` and the `kforge-check` hook, on real git repositories; the hook itself through
`pre-commit try-repo` (pre-commit installs this package into its own environment and runs it)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fakes.gate_repos import REF, init_repo  # the same reference module the gate's repositories hold
from fakes.gitrepos import commit_all, git, write

PACKAGE_ROOT = Path(__file__).resolve().parents[2]

KERNEL = "def kernel(x, y):\n    return x * 2.0 + y\n"
MANIFEST = """\
version: 1
kernels:
  k:
    file: k.py
    entry: kernel
    reference: ref.py:reference
    inputs: ref.py:make_inputs
    shapes: [{n: 64}]
    targets: [cpu]
  selfref:
    file: selfref.py
    entry: kernel
    inputs: ref.py:make_inputs
    shapes: [{n: 64}]
    targets: [cpu]
  gpu:
    file: gpu.py
    entry: kernel
    reference: ref.py:reference
    inputs: ref.py:make_inputs
    shapes: [{n: 64}]
    targets: [cuda]
"""
POLICY = "version: 1\ngate: {threshold: 0.05}\n"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "k.py", KERNEL)
    write(root, "selfref.py", KERNEL)
    write(root, "gpu.py", "from gpuhelper import twice\n\n\ndef kernel(x, y):\n    return twice(x) + y\n")
    write(root, "gpuhelper.py", "def twice(x):\n    return x * 2.0\n")
    write(root, "other.py", "print('not a kernel')\n")
    write(root, "README.md", "# kernels\n")
    write(root, "kforge.yaml", MANIFEST)
    write(root, "policies/gate.yml", POLICY)
    commit_all(root, "kernels")
    return root


def precommit(root: Path, *files: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "kforge_bot.cli", "precommit", *files], cwd=root, env=env,
                          check=False, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_correct_change_passes_and_a_wrong_one_fails_against_the_committed_version(repo):
    write(repo, "k.py", "def kernel(x, y):\n    return y + x + x\n")  # equivalent rewrite
    write(repo, "selfref.py", "def kernel(x, y):\n    return x * 2.0 + y * 1.01\n")  # no reference: vs HEAD
    git(repo, "add", "k.py", "selfref.py")
    proc = precommit(repo, "k.py", "selfref.py")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "k: checking k.py against its reference on cpu" in out and "k: correct" in out
    assert "selfref: checking selfref.py against the committed (HEAD) version" in out
    assert "FAILED: selfref.py: kernel 'selfref' is incorrect" in out
    assert "gpu" not in out  # nothing it depends on was staged


def test_kernel_without_its_device_is_skipped_but_validated(repo):
    if _cuda():
        pytest.skip("this machine has CUDA: the check would run rather than skip")
    write(repo, "gpuhelper.py", "def twice(x):\n    return x + x\n")
    git(repo, "add", "gpuhelper.py")
    proc = precommit(repo, "gpuhelper.py", "kforge.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kforge.yaml: valid manifest" in proc.stdout
    assert "gpu: correctness check SKIPPED: none of the kernel's targets (cuda) is on this machine" in proc.stdout


def test_invalid_manifest_and_policy_block_the_commit(repo):
    write(repo, "kforge.yaml", MANIFEST.replace("    targets: [cpu]\n", "    targets: [cpu]\n    speed: fast\n", 1))
    write(repo, "policies/gate.yml", "version: 1\ngate: {threshold: 2}\n")
    proc = precommit(repo, "kforge.yaml", "policies/gate.yml")
    assert proc.returncode == 1
    assert "kforge.yaml: kernels.k: unknown key 'speed'" in proc.stderr
    assert "gate.yml: gate.threshold" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_files_no_kernel_depends_on_pass(repo):
    proc = precommit(repo, "other.py", "README.md")
    assert proc.returncode == 0, proc.stderr
    assert "no staged change touches a managed kernel" in proc.stdout


def test_hook_definition_matches_the_documented_contract():
    hooks = yaml.safe_load((PACKAGE_ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "kforge-check")
    assert hook["language"] == "python" and hook["entry"] == "kforge-bot precommit"
    import re

    pattern = re.compile(hook["files"])
    for path in ("kernels/softmax.py", "kforge.yaml", "sub/kforge.yaml", "policies/gate.yml", "policies/x.yaml"):
        assert pattern.search(path), path
    for path in ("README.md", "kforge.yaml.bak", "config/gate.yml", "notes.txt"):
        assert not pattern.search(path), path


# ------------------------------------------------------------------------ through pre-commit itself


def _hook_repo(dest: Path) -> Path:
    """This package as a hook repository: the files pip needs to install it, committed."""
    init_repo(dest)
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(PACKAGE_ROOT / name, dest / name)
    shutil.copytree(PACKAGE_ROOT / "kforge_bot", dest / "kforge_bot", ignore=shutil.ignore_patterns("__pycache__"))
    commit_all(dest, "kforge-bot")
    return dest


def _dependencies_view(dest: Path) -> Path:
    """The running interpreter's installed packages minus kforge-bot itself, for the hook's environment.

    pre-commit installs the hook repository into a fresh virtualenv; resolving its dependencies there
    would download torch (gigabytes). With PIP_NO_DEPS pip installs only kforge-bot, and this view on
    PYTHONPATH supplies torch, click, rich, ... without shadowing the kforge_bot that pre-commit installed."""
    dest.mkdir()
    for folder in [*site.getsitepackages(), site.getusersitepackages()]:
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            if name.startswith(("kforge", "__editable__")) or name.endswith(".pth") or (dest / name).exists():
                continue
            os.symlink(os.path.join(folder, name), dest / name)
    return dest


@pytest.mark.slow
def test_pre_commit_try_repo_blocks_a_commit_that_breaks_a_kernel(repo, tmp_path):
    pytest.importorskip("pre_commit", reason="pre-commit is in the dev extras: pip install pre-commit")
    hooks = _hook_repo(tmp_path / "kforge-bot")
    deps = _dependencies_view(tmp_path / "deps")
    write(repo, "k.py", "def kernel(x, y):\n    return x * 2.0 - y\n")
    git(repo, "add", "k.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PRE_COMMIT"))}
    env.update(PIP_NO_DEPS="1", PYTHONPATH=str(deps), PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    proc = subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(hooks), "kforge-check"], cwd=repo,
                          env=env, check=False, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "kforge-bot kernel check" in out and "Failed" in out
    assert "FAILED: k.py: kernel 'k' is incorrect" in out
    assert "Installing environment for" in out  # pre-commit built the hook's own environment and ran it there
