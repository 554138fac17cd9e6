"""The head of a pull request contributes its kernel's code and nothing else (issue 38, section 2): attacks a pull
request made on what the gate took from the head, each on a real git repository, through the real CLI in a child
process as GitHub Actions runs it (as a non-root user with the sandbox on, in CI).

- the head's manifest chose what is compared: `outputs: 0` hid a wrong second output; dropping `backward:` hid a
  halved gradient;
- a GPU MODE head's `utils.py`, imported by the base's reference, replaced an op of the reference;
- a GPU MODE head moved a benchmark set into `tests:`, so the set where it is far slower was not timed;
- the head moved its kernel's `file:` outside the policy's kernel_paths: "removed in head", exit 0;
- the base was the merge base, which the author chooses: a branch made before main tightened a tolerance passed
  with a kernel off by more than main's tolerance.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fakes.gate_repos import PLAIN, POLICY, REF, by_id, entry, init_repo
from fakes.gitrepos import commit_all, git, write
from gate.test_trust_boundary import gate_run

GPUMODE_DATA = Path(__file__).resolve().parents[1] / "data" / "gpumode"

TWO_OUT = """\
import torch


def kernel(x, y):
    return x * 2.0 + y, x - y
"""
AUTOGRAD = """\
import torch


class _Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * 2.0 + y

    @staticmethod
    def backward(ctx, grad):
        return grad * 2.0, grad


def kernel(x, y):
    return _Scaled.apply(x, y)
"""
SUBMISSION_SLOW_ABOVE_128 = """\
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    for _ in range(40 if a.shape[0] > 128 else 1):  # redundant work on the large set only
        torch.add(a, b, alpha=2, out=out)
    return out.clamp_(min=0)
"""
SPLIT_TASK = """\
files:
  - {"name": "submission.py", "source": "@SUBMISSION@"}
  - {"name": "task.py", "source": "task.py"}
  - {"name": "utils.py", "source": "../utils.py"}
lang: "py"
tolerance: {atol: 1.0e-2, rtol: 1.0e-2}
"""
# Base: the large set (160) is a benchmark, timed; head: the same sets in the same order, the large one a test.
TIMED_BASE = SPLIT_TASK + ("tests:\n  - {size: 33, seed: 1}\n"
                           "benchmarks:\n  - {size: 160, seed: 2}\n  - {size: 96, seed: 3}\n")
TIMED_HEAD = SPLIT_TASK + ("tests:\n  - {size: 33, seed: 1}\n  - {size: 160, seed: 2}\n"
                           "benchmarks:\n  - {size: 96, seed: 3}\n")
OWN_ENTRY = "  {name}:\n    file: kernels/{name}.py\n    entry: kernel\n    inputs: ref.py:make_inputs\n" \
            "    shapes: [{{n: 64}}]\n    targets: [cpu]\n{extra}"


def manifest(*, late_tolerance: bool, extra: dict[str, str] | None = None, dropped: bool = True) -> str:
    """The repository's kforge.yaml: `extra` adds keys to an entry; `late` has a loose tolerance on the fork point;
    `dropped` is there unless main removed it."""
    extra = extra or {}
    late = "    tolerance: {atol: 0.1, rtol: 0.1}\n" if late_tolerance else ""
    return ("version: 1\nkernels:\n"
            + OWN_ENTRY.format(name="two", extra=extra.get("two", ""))
            + entry("grad", file="kernels/grad.py", extra=extra.get("grad", "    backward: {inputs: [x, y]}\n"))
            + entry("moved", file=extra.get("moved", "kernels/moved.py"))
            + entry("late", file="kernels/late.py", extra=late)
            + (entry("dropped", file="kernels/dropped.py", extra=extra.get("dropped", "")) if dropped else ""))


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """Main holds correct kernels; the branch `feature` makes each wrong (or slower) and changes, beside it, a part of
    its test that the gate took from the head. After the branch point, main tightens `late`'s tolerance."""
    tmp = tmp_path_factory.mktemp("head_code_only")
    root = tmp / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "kernels/two.py", TWO_OUT)
    write(root, "kernels/grad.py", AUTOGRAD)
    for name in ("moved", "late", "dropped"):
        write(root, f"kernels/{name}.py", PLAIN)
    write(root, "kforge.yaml", manifest(late_tolerance=True))
    shutil.copytree(GPUMODE_DATA, root / "kernels" / "gm", ignore=shutil.ignore_patterns("__pycache__"))
    # A track of its own (its own utils.py), so that the head's utils.py below is no part of this problem's test.
    shutil.copytree(GPUMODE_DATA / "scaled_add_py", root / "kernels" / "gm2" / "timed_py",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(GPUMODE_DATA / "utils.py", root / "kernels" / "gm2" / "utils.py")
    write(root, "kernels/gm2/timed_py/task.yml", TIMED_BASE)
    write(root, "policy.yml", POLICY + "kernel_paths: ['kernels/**']\n")
    commit_all(root, "correct kernels")
    git(root, "checkout", "-q", "-b", "feature")
    write(root, "kernels/two.py", TWO_OUT.replace("x - y", "x + y"))
    write(root, "kernels/grad.py", AUTOGRAD.replace("grad * 2.0, grad", "grad * 1.0, grad"))
    (root / "kernels" / "moved.py").unlink()
    write(root, "scratch/moved.py", PLAIN.replace("x * 2.0 + y", "x * 2.0 - y"))
    write(root, "kernels/late.py", PLAIN.replace("x * 2.0 + y", "x * 2.0 + y + 0.05"))
    write(root, "kernels/dropped.py", PLAIN.replace("x * 2.0 + y", "x * 2.0 + y + 0.5"))
    write(root, "kforge.yaml", manifest(late_tolerance=True, extra={
        "two": "    outputs: 0\n", "grad": "", "moved": "scratch/moved.py",
        "dropped": "    tolerance: {atol: 1.0, rtol: 1.0}\n"}))
    utils = root / "kernels" / "gm" / "utils.py"
    utils.write_text(utils.read_text() + "\n\ntorch.relu = lambda t: t * 1.0  # the reference's op, replaced\n")
    write(root, "kernels/gm/scaled_add_py/submission.py",
          (GPUMODE_DATA / "scaled_add_py" / "submission.py").read_text().replace("out.clamp_(min=0)", "out"))
    write(root, "kernels/gm2/timed_py/submission.py", SUBMISSION_SLOW_ABOVE_128)
    write(root, "kernels/gm2/timed_py/task.yml", TIMED_HEAD)
    commit_all(root, "faster kernels")
    git(root, "checkout", "-q", "main")
    write(root, "kforge.yaml", manifest(late_tolerance=False, dropped=False))  # late's tolerance tightened
    (root / "kernels" / "dropped.py").unlink()
    commit_all(root, "late: the default tolerance; dropped removed")
    git(root, "checkout", "-q", "feature")
    for path in root.rglob("*"):  # readable by the non-root user CI runs the gate as
        path.chmod(path.stat().st_mode | 0o044 | (0o011 if path.is_dir() else 0))
    return gate_run(tmp, root)


def _kernel(run: dict, kid: str) -> dict:
    assert run["report"] is not None, run["proc"].stderr
    return by_id(run["report"]).get(kid) or {"verdict": "absent", "removed": run["report"].get("removed")}


@pytest.mark.slow
@pytest.mark.parametrize("kid,part", [("two", "outputs"), ("grad", "backward"),
                                      ("kernels/gm/scaled_add_py", "support")])
def test_the_heads_manifest_and_modules_cannot_choose_what_is_compared(attacked, kid, part):
    """Each kernel is wrong under the base's test and right under what its change wrote beside it."""
    got = _kernel(attacked, kid)
    assert got["verdict"] == "spec-changed", got
    assert got["spec_changes"] == [part] and got["under_spec"] == {"base": "incorrect"}, got
    assert attacked["proc"].returncode == 1


@pytest.mark.slow
def test_which_gpumode_sets_are_timed_is_the_bases(attacked):
    """The head's submission is 40x slower on the set its task.yml moved from benchmarks to tests."""
    got = _kernel(attacked, "kernels/gm2/timed_py")
    assert got["verdict"] == "spec-changed", got
    assert got["spec_changes"] == ["timed"] and got["under_spec"] == {"base": "regression"}, got


@pytest.mark.slow
def test_a_kernel_moved_out_of_the_kernel_paths_is_still_gated(attacked):
    """The base's kernel `moved`; the head moves its file to scratch/ (outside kernel_paths) and makes it wrong."""
    got = _kernel(attacked, "moved")
    assert got["verdict"] == "incorrect", got
    assert "moved" not in attacked["report"]["removed"] and attacked["proc"].returncode == 1


@pytest.mark.slow
def test_the_base_is_the_target_branchs_tip_and_the_stricter_test_stands(attacked):
    """`late` is off by 0.05: within the branch point's tolerance (0.1), not within the one main has now. The
    head did not edit that tolerance (it is the branch point's), so this is no spec change: main's test applies."""
    got = _kernel(attacked, "late")
    assert got["verdict"] == "incorrect", got
    assert got["spec_changes"] == [] and got["under_spec"]["tip"] == "incorrect", got
    # Correct under the branch point's tolerance: a timing verdict, or `inconclusive` where the timing did not decide
    # (CI's clean-clone run of 396ef06) - never `incorrect`.
    assert got["under_spec"]["branch_point"] in ("pass", "improved", "regression", "inconclusive"), got
    assert attacked["report"]["base"]["sha"] != attacked["report"]["base"]["merge_base"]


@pytest.mark.slow
def test_a_kernel_main_removed_since_the_branch_point_is_held_to_the_branch_points_test(attacked):
    """Main removed `dropped` after the branch point; the branch makes it wrong and loosens its tolerance. Without a
    tip version, the branch point's is its base: it is not a new kernel judged under the test the branch wrote."""
    got = _kernel(attacked, "dropped")
    assert got["verdict"] == "spec-changed", got
    assert got["spec_changes"] == ["tolerance"] and got["under_spec"] == {"base": "incorrect"}, got


# ------------------------------------------------------------------ section 3: base and head in one process

BUILDS_BY_FILE_NAME = """\
import ctypes
import os
import subprocess
import sys
import tempfile

import torch

_ROOT = sys.path[0]  # the checkout this module is being imported from
_LIB = os.path.join(tempfile.gettempdir(), "scale.so")  # named after the .c file alone, not its checkout
subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", _ROOT, os.path.join(_ROOT, "scale.c"), "-o", _LIB], check=True)
_factor = ctypes.CDLL(_LIB).factor
_factor.restype = ctypes.c_double


def kernel(x, y):
    return x * _factor() + y
"""


@pytest.mark.slow
def test_a_head_never_runs_a_library_the_base_loaded(tmp_path):
    """The kernel builds `scale.c` into a library named after the file alone and loads it. The head changes only the
    header (a wrong factor). Loaded in the base's process, the head's `ctypes.CDLL` of the same path is the base's
    library, already loaded: the head's wrong build never runs. In a process of its own it does, and is incorrect."""
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "k.py", BUILDS_BY_FILE_NAME)
    write(root, "scale.c", '#include "scale.h"\n\ndouble factor(void) { return FACTOR; }\n')
    write(root, "scale.h", "#define FACTOR 2.0\n")
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("k"))
    write(root, "policy.yml", POLICY)
    commit_all(root, "a kernel that builds a C library")
    git(root, "checkout", "-q", "-b", "feature")
    write(root, "scale.h", "#define FACTOR 3.0\n")
    commit_all(root, "head: the header alone changes")
    for path in root.rglob("*"):
        path.chmod(path.stat().st_mode | 0o044 | (0o011 if path.is_dir() else 0))
    run = gate_run(tmp_path, root)
    got = _kernel(run, "k")
    assert got["verdict"] == "incorrect", got
    assert run["proc"].returncode == 1


REF_VIA_HELPER = """\
import torch
from helper import scale


def reference(x, y):
    return scale(x) + y


def make_inputs(n):
    return torch.randn(n, n), torch.randn(n, n)
"""


@pytest.mark.slow
def test_a_heads_import_roots_cannot_shadow_a_module_the_bases_reference_imports(tmp_path):
    """Red-team pass, already blocked (a regression test): `import_roots` is the head's (where its code lives), so a
    head adds `import_roots: [evil]` with an `evil/helper.py` of the name the base's reference imports, computing
    what its wrong kernel computes. Two walls hold: the reference is the base's Implementation (judged_spec), and a
    reference outside a package is imported from its own folder in a worker of its own, never from any import root
    (kforge_bot.evaluate.worker.importing). With the first removed by hand (the head's reference, with the head's roots)
    it still held, by the second; the test fails only if both go."""
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF_VIA_HELPER)
    write(root, "helper.py", "def scale(x):\n    return x * 2.0\n")
    write(root, "k.py", PLAIN)
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("k", file="k.py"))
    write(root, "policy.yml", POLICY)
    commit_all(root, "base")
    git(root, "checkout", "-q", "-b", "feature")
    write(root, "k.py", PLAIN.replace("x * 2.0", "x * 3.0"))
    write(root, "evil/helper.py", "def scale(x):\n    return x * 3.0\n")
    write(root, "kforge.yaml", "version: 1\nkernels:\n" + entry("k", file="k.py", extra="    import_roots: [evil]\n"))
    commit_all(root, "head: a wrong kernel, and a helper of the reference's name on its own import roots")
    run = gate_run(tmp_path, root)
    got = by_id(run["report"])["k"]
    assert got["verdict"] == "incorrect", got
    assert run["proc"].returncode == 1
