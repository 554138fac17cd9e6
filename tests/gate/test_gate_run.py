"""The regression gate: whole runs on real git repositories with tiny CPU kernels.

The repository scenario (one gate run, several tests reading it): a kernel made 20x slower, one made
incorrect, one that no longer imports, one changed only through a helper it imports, one unchanged
kernel and an unchanged KernelBench file. The gate runs as the real CLI in a child process, with
GitHub's Actions environment (step summary file, annotations) and a loopback GitHub API for the
commit status.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from fakes.gate_repos import (
    KB,
    PACKAGE_ROOT,
    PLAIN,
    POLICY,
    REF,
    SLOW_ON_LARGE,
    SLOW_ON_SMALL,
    VIA_HELPER,
    by_id,
    cli,
    init_repo,
    manifest,
    one_kernel_repo,
    shaped_manifest,
)
from fakes.github_server import FakeGitHub
from fakes.gitrepos import commit_all, git, write

from kforge_bot.config.policy import load_policy
from kforge_bot.gate.decision import regression_bound
from kforge_bot.gate.run import run_gate

REPO = "octo/kernels"


# ------------------------------------------------------------------------- a real repository and run


def run_scenario(folder, fake_workers: bool = False) -> dict:
    """The repository scenario gated by the real CLI. `fake_workers`: on scripted workers (tests/fakes/workers.py),
    each head kernel's behaviour named in its source, and without `viahelper` (a helper's change reaches a script
    only through a real worker's import)."""
    root = folder / "repo"
    init_repo(root)
    names = ["slow", "wrong", "broken", "same"] + ([] if fake_workers else ["viahelper"])
    write(root, "ref.py", REF)
    write(root, "helper.py", "def scale(x):\n    return x * 2.0\n")
    for name in names:
        write(root, f"{name}.py", VIA_HELPER if name == "viahelper" else PLAIN)
    write(root, "kb/relu_problem.py", KB)
    write(root, "kforge.yaml", manifest(names))
    write(root, "policy.yml", POLICY)
    base = commit_all(root, "kernels")
    git(root, "checkout", "-q", "-b", "feature")
    script = (lambda text: f"# fake-worker: {text}\n") if fake_workers else (lambda text: "")
    write(root, "slow.py", PLAIN.replace("    return x * 2.0 + y",
                                         "    for _ in range(20):  # redundant work\n"
                                         "        out = x * 2.0 + y\n    return out") + script("ms=20"))
    write(root, "wrong.py", PLAIN.replace("x * 2.0 + y", "x * 2.0 - y") + script("wrong"))
    write(root, "broken.py", "from helper import scale_v2\n\n\ndef kernel(x, y):\n    return scale_v2(x) + y\n"
          + script("error=\"ImportError: cannot import name 'scale_v2' from 'helper'\""))
    # Only the helper changes (20x slower): a regression of `viahelper` shows both that the change is
    # traced through the import and that each side ran its own revision's helper.
    write(root, "helper.py", "def scale(x):\n    for _ in range(20):\n        out = x * 2.0\n    return out\n")
    head = commit_all(root, "changes")

    summary = root.parent / "summary.md"
    summary.write_text("earlier step\n")
    report_path = root.parent / "report.json"
    cache = root.parent / "cache"
    with FakeGitHub() as fake:
        fake.add_repo(REPO, root / ".git")
        env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_TOKEN": fake.token,
               "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": fake.api_url}
        if fake_workers:
            env["KFORGE_TEST_FAKE_WORKERS"] = "1"  # tests/fakes/quiet_machine/sitecustomize.py
        proc = cli("gate", "--base", "main", "--policy", "policy.yml", "--json", str(report_path),
                   "--cache-dir", str(cache), cwd=root, env=env)
        statuses = list(fake.statuses)
        assert fake.schema_errors == []
    return {"root": root, "base": base, "head": head, "proc": proc, "summary": summary.read_text(),
            "report": json.loads(report_path.read_text()) if report_path.exists() else None,
            "statuses": statuses, "cache": cache}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return run_scenario(tmp_path_factory.mktemp("gate"))


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """The scenario on scripted workers: the gate's own logic (plan, decisions, report, status, cache) in the fast
    lane; `scenario` runs the same on real workers, in the slow one."""
    return run_scenario(tmp_path_factory.mktemp("gate-scripted"), fake_workers=True)


@pytest.mark.slow
def test_gate_verdicts_on_a_real_change(scenario):
    proc, report = scenario["proc"], scenario["report"]
    assert report is not None, proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    kernels = by_id(report)
    assert set(kernels) == {"slow", "wrong", "broken", "viahelper"}
    assert kernels["slow"]["verdict"] == "regression"
    assert kernels["slow"]["speedup_ci"][1] < regression_bound(0.25)
    assert kernels["wrong"]["verdict"] == "incorrect" and "outside" in kernels["wrong"]["reason"]
    assert kernels["broken"]["verdict"] == "error" and "scale_v2" in kernels["broken"]["reason"]
    assert all(k["measured"] and not k["cached"] for k in kernels.values())
    assert report["exit_code"] == 1 and report["counts"]["regression"] == 2
    assert report["base"]["merge_base"] == scenario["base"] and report["head"]["sha"] == scenario["head"]
    assert report["targets"]["cpu"]["torch_version"]
    assert kernels["slow"]["threshold"] == 0.25 and kernels["slow"]["threshold_from"] == "gate.threshold.cpu"
    assert kernels["slow"]["threshold_text"] == "25% (cpu)"
    assert report["required_targets"] == {"targets": [], "require_all_targets": False, "unmeasured": {},
                                          "fails": False}


@pytest.mark.slow
def test_unchanged_kernels_are_not_measured_and_a_helper_change_is(scenario):
    report = scenario["report"]
    assert sorted(report["unchanged"]) == ["kb/relu_problem.py", "same"]
    via = by_id(report)["viahelper"]
    assert via["touched_by"] == ["helper.py"]  # viahelper.py itself did not change
    # Had both sides imported the same `helper` (Python keeps the first module of a name), they would
    # time the same code and pass.
    assert via["measured"] and via["verdict"] == "regression"  # the verdict, not a ratio: the CPU is shared


@pytest.mark.slow
def test_step_summary_annotations_and_status(scenario):
    proc, summary = scenario["proc"], scenario["summary"]
    assert summary.startswith("earlier step\n")  # appended, not overwritten
    assert "### kforge-bot gate: failed" in summary
    assert "| kernel | base | head | change (interval) | threshold | verdict | notes |" in summary
    assert "| 25% (cpu) |" in summary  # the policy's threshold (policy.yml sets 0.25 for every target)
    assert "| slow |" in summary and "**regression**" in summary and "**incorrect**" in summary
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error ")]
    assert {line.split(",")[0] for line in errors} == {"::error file=slow.py", "::error file=wrong.py",
                                                       "::error file=broken.py", "::error file=viahelper.py"}
    slow = next(line for line in errors if "file=slow.py" in line)
    assert "title=kforge gate%3A slow regression::" in slow and "slower than the base" in slow
    assert len(scenario["statuses"]) == 1
    status = scenario["statuses"][0]
    assert status["sha"] == scenario["head"] and status["state"] == "failure"
    assert status["context"] == "kforge-bot/gate" and "2 regression" in status["description"]


@pytest.mark.slow
def test_second_run_plans_cache_hits_for_everything_but_errors(scenario):
    from kforge_bot.targets.fingerprint import TargetFingerprint, probe_fingerprint

    root, policy = scenario["root"], load_policy(scenario["root"] / "policy.yml")
    here = {"cpu": probe_fingerprint("cpu")}
    plan = run_gate(root, "main", policy=policy, cache_dir=scenario["cache"], fingerprints=here, measure=False)
    kernels = {k.id: k for k in plan.kernels}
    assert {k for k, v in kernels.items() if v.cached} == {"slow", "wrong", "viahelper"}
    assert kernels["slow"].verdict == "regression" and kernels["wrong"].verdict == "incorrect"
    assert not kernels["broken"].cached  # errors are never cached: they may be the machine's fault
    other = {"cpu": TargetFingerprint("cpu", "Some Other CPU", here["cpu"].torch_version)}
    plan = run_gate(root, "main", policy=policy, cache_dir=scenario["cache"], fingerprints=other, measure=False)
    assert not any(k.cached for k in plan.kernels)


# ---------------------------------------------------------- the same scenario on scripted workers (fast lane)


def test_scripted_gate_verdicts_exit_code_and_report(scripted):
    proc, report = scripted["proc"], scripted["report"]
    assert report is not None, proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    kernels = by_id(report)
    assert set(kernels) == {"slow", "wrong", "broken"}
    assert kernels["slow"]["evaluation"]["device_name"] == "fake device"  # scripted, no torch worker started
    assert kernels["slow"]["verdict"] == "regression"
    assert kernels["slow"]["speedup_ci"][1] < regression_bound(0.25)
    assert kernels["wrong"]["verdict"] == "incorrect" and "outside" in kernels["wrong"]["reason"]
    assert kernels["broken"]["verdict"] == "error" and "scale_v2" in kernels["broken"]["reason"]
    assert all(k["measured"] and not k["cached"] for k in kernels.values())
    assert report["exit_code"] == 1 and report["counts"]["regression"] == 1
    assert report["base"]["merge_base"] == scripted["base"] and report["head"]["sha"] == scripted["head"]
    assert kernels["slow"]["threshold"] == 0.25 and kernels["slow"]["threshold_from"] == "gate.threshold.cpu"
    assert sorted(report["unchanged"]) == ["kb/relu_problem.py", "same"]


def test_scripted_step_summary_annotations_and_status(scripted):
    proc, summary = scripted["proc"], scripted["summary"]
    assert summary.startswith("earlier step\n")  # appended, not overwritten
    assert "### kforge-bot gate: failed" in summary
    assert "| kernel | base | head | change (interval) | threshold | verdict | notes |" in summary
    assert "| slow |" in summary and "**regression**" in summary and "**incorrect**" in summary
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error ")]
    assert {line.split(",")[0] for line in errors} == {"::error file=slow.py", "::error file=wrong.py",
                                                       "::error file=broken.py"}
    slow = next(line for line in errors if "file=slow.py" in line)
    assert "title=kforge gate%3A slow regression::" in slow and "slower than the base" in slow
    (status,) = scripted["statuses"]
    assert status["sha"] == scripted["head"] and status["state"] == "failure"
    assert status["context"] == "kforge-bot/gate" and "1 regression" in status["description"]


def test_scripted_second_run_plans_cache_hits_for_everything_but_errors(scripted):
    from kforge_bot.targets.fingerprint import TargetFingerprint, probe_fingerprint

    root, policy = scripted["root"], load_policy(scripted["root"] / "policy.yml")
    here = {"cpu": probe_fingerprint("cpu")}
    plan = run_gate(root, "main", policy=policy, cache_dir=scripted["cache"], fingerprints=here, measure=False)
    kernels = {k.id: k for k in plan.kernels}
    assert {k for k, v in kernels.items() if v.cached} == {"slow", "wrong"}
    assert kernels["slow"].verdict == "regression" and kernels["wrong"].verdict == "incorrect"
    assert not kernels["broken"].cached  # errors are never cached: they may be the machine's fault
    other = {"cpu": TargetFingerprint("cpu", "Some Other CPU", here["cpu"].torch_version)}
    plan = run_gate(root, "main", policy=policy, cache_dir=scripted["cache"], fingerprints=other, measure=False)
    assert not any(k.cached for k in plan.kernels)


# ------------------------------------------------------------------------------ per shape set


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    """A head far faster than the base on its large shape set and far slower on its small one, gated as in CI."""
    root = tmp_path_factory.mktemp("gate-shapes") / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "mm.py", SLOW_ON_LARGE)
    write(root, "kforge.yaml", shaped_manifest("mm", [16, 128]))
    policy = POLICY.replace("timing_budget_s: 1.0", "timing_budget_s: 2.0")  # two shape sets share it
    write(root, "policy.yml", policy)
    write(root, "informational.yml", policy.replace(
        "gate: {threshold: 0.25, confidence: 0.95}",
        "gate:\n  threshold: 0.25\n  rules:\n    - kernel: mm\n      shape_sets: {0: {informational: true, "
        "reason: a warm-up size}}"))
    commit_all(root, "mm")
    git(root, "checkout", "-q", "-b", "feature")
    write(root, "mm.py", SLOW_ON_SMALL)
    commit_all(root, "fast on large inputs")
    summary = root.parent / "summary.md"
    report_path = root.parent / "report.json"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    proc = cli("gate", "--base", "main", "--policy", "policy.yml", "--json", str(report_path), "--no-cache",
               cwd=root, env=env)
    return {"root": root, "proc": proc, "summary": summary.read_text() if summary.exists() else "",
            "report": json.loads(report_path.read_text()) if report_path.exists() else None}


@pytest.mark.slow
def test_a_shape_set_far_slower_fails_the_gate_however_fast_the_others(shaped):
    # Pooled into one median, a head 30x faster on one set and 30x+ slower on the other read as a small change
    # with a wide interval, and passed after its confirmation run.
    proc, report = shaped["proc"], shaped["report"]
    assert report is not None, proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    mm = by_id(report)["mm"]
    assert mm["verdict"] == "regression", mm["reason"]
    assert [(s["shape_set"], s["regression"]) for s in mm["shapes"]] == [(0, True), (1, False)]
    assert mm["shapes"][1]["status"] != "regression"  # far faster there (improved, unless the load left no interval)
    assert "shape set 0 (n=16)" in mm["reason"] and "1 of 2 shape sets" in mm["reason"]
    assert mm["evaluation"]["per_shape"][0]["regression"] is True
    # One definition of change: the medians printed beside the change are geometric means over the shape sets, as
    # the change is, so their ratio lies within its interval (a sum of medians is ruled by the slowest set: 5.4x
    # apart beside a "3.1x slower" before). Within the interval, not equal: a median of per-pair ratios is not
    # quite a ratio of medians, and the machine is shared.
    low, high = mm["speedup_ci"]
    assert low / 1.1 <= mm["base_ms"] / mm["head_ms"] <= high * 1.1
    assert "(geometric mean)" in proc.stdout


@pytest.mark.slow
def test_every_gate_output_shows_the_shape_sets(shaped):
    proc, summary = shaped["proc"], shaped["summary"]
    assert "| mm, shape set 0 (n=16) |" in summary and "| mm, shape set 1 (n=128) |" in summary
    assert re.search(r"\| mm, shape set 0 \(n=16\) \|.*\| \*\*regression\*\* \| \d+ pairs \|", summary)
    assert "each set is judged on its own" in summary
    log = [line for line in proc.stdout.splitlines() if line.startswith("mm, shape set 0 (n=16): regression: change ")]
    assert log, proc.stdout
    error = next(line for line in proc.stdout.splitlines() if line.startswith("::error file=mm.py"))
    assert "Per shape set:%0A- shape set 0 (n=16): regression: change " in error
    assert "%0A- shape set 1 (n=128): " in error


@pytest.mark.slow
def test_a_shape_set_the_policy_names_informational_does_not_fail_the_gate(shaped):
    policy = load_policy(shaped["root"] / "informational.yml")
    assert policy.rule_for("mm", "mm.py", "cpu").informational_shapes == (0,)
    report = run_gate(shaped["root"], "main", policy=policy, use_cache=False)
    mm = next(k for k in report.kernels if k.id == "mm")
    assert mm.verdict in ("pass", "improved"), mm.reason
    assert [(s["shape_set"], s["informational"]) for s in mm.shapes] == [(0, True), (1, False)]
    assert report.exit_code == 0


# ------------------------------------------------------------------------------ usage and config errors


@pytest.fixture(scope="module")
def small_repo(tmp_path_factory):
    return one_kernel_repo(tmp_path_factory.mktemp("gate-small") / "repo", message="one kernel")


def test_unknown_base_is_a_usage_error(small_repo):
    proc = cli("gate", "--base", "no-such-branch", cwd=small_repo)
    assert proc.returncode == 2
    assert "unknown revision 'no-such-branch'" in proc.stderr and "Traceback" not in proc.stderr


def test_invalid_policy_and_target_are_usage_errors(small_repo, tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("gate: {threshold: 2}\n")
    proc = cli("gate", "--base", "HEAD", "--policy", str(bad), cwd=small_repo)
    assert proc.returncode == 2 and "gate.threshold" in proc.stderr
    proc = cli("gate", "--base", "HEAD", "--target", "tpu9000", cwd=small_repo)
    assert proc.returncode == 2 and "unknown target 'tpu9000'" in proc.stderr


def test_malformed_manifest_in_head_is_a_config_error(tmp_path):
    root = one_kernel_repo(tmp_path / "repo", message="one kernel")
    write(root, "kforge.yaml", "version: 1\nkernels: [oops\n")
    commit_all(root, "broken manifest")
    proc = cli("gate", "--base", "HEAD~1", cwd=root)
    assert proc.returncode == 2 and "kforge.yaml" in proc.stderr and "not valid YAML" in proc.stderr


def test_nothing_changed_passes_without_measuring(small_repo):
    proc = cli("gate", "--base", "HEAD", "--json", "-", cwd=small_repo)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["kernels"] == [] and report["unchanged"] == ["k"]
    assert "commit status: skipped" in proc.stderr


def test_a_kernel_only_the_target_branch_changed_is_not_this_changes(tmp_path):
    """The base is main's tip, but what a change touches is its own diff: main rewrote `k` and added `new` after the
    branch point, the branch changed only a README. Nothing is measured, nothing is listed as removed."""
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "k.py", PLAIN)
    write(root, "kforge.yaml", manifest(["k"]))
    commit_all(root, "base")
    git(root, "checkout", "-q", "-b", "feature")
    write(root, "README.md", "docs\n")
    commit_all(root, "feature: docs only")
    git(root, "checkout", "-q", "main")
    write(root, "k.py", PLAIN.replace("x * 2.0 + y", "y + x * 2.0"))
    write(root, "new.py", PLAIN)
    write(root, "kforge.yaml", manifest(["k", "new"]))
    main_tip = commit_all(root, "main moves on")
    git(root, "checkout", "-q", "feature")
    report = run_gate(root, "main", policy=load_policy(None), use_cache=False, measure=False)
    assert report.base_sha == main_tip and report.merge_base != main_tip
    assert report.kernels == [] and report.unchanged == ["k"] and report.removed == []


def test_kernels_that_stop_parsing_are_errors_and_deleted_ones_are_listed(tmp_path):
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "k.py", PLAIN)
    write(root, "gone.py", PLAIN)
    write(root, "kforge.yaml", manifest(["k", "gone"]))
    write(root, "problems/relu.py", KB)
    commit_all(root, "base")
    write(root, "kforge.yaml", manifest(["k"]))
    (root / "gone.py").unlink()
    write(root, "k.py", "def kernel(x, y):\n    return x * 2.0 + y +\n")  # a syntax error
    write(root, "problems/relu.py", KB.replace("def get_inputs():", "def get_inputs(:"))
    commit_all(root, "head")
    policy = load_policy(None)
    report = run_gate(root, "HEAD~1", policy=policy, measure=False)  # nothing here needs a measurement
    kernels = {k.id: k for k in report.kernels}
    assert report.removed == ["gone"]
    assert kernels["k"].verdict == "error" and "syntax error" in kernels["k"].reason
    assert kernels["k"].reason.startswith("does not load: k.py")  # a repository path, not the temporary checkout's
    assert kernels["problems/relu.py"].verdict == "error"
    assert "no longer a KernelBench problem" in kernels["problems/relu.py"].reason
    assert report.exit_code == 1


# ------------------------------------------------------- base and head import their own local modules


@pytest.mark.slow
def test_base_and_head_each_import_their_own_local_helper(tmp_path):
    """Both revisions say `from helper import scale` and mean two different files. The kernel names no
    reference, so the base version is the oracle: the head (whose helper adds 1) must come out
    incorrect. Had the worker let one revision's `helper` serve both, both would compute the same
    thing and the gate would pass. The gate hands the base over as a plain Implementation rooted in
    its own checkout (no import shim); the worker's per-implementation loading does the isolating."""
    import kforge_bot.gate.run as gate_module

    assert not hasattr(gate_module, "isolated_implementation")
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "helper.py", "def scale(x):\n    return x * 2.0\n")
    write(root, "viahelper.py", VIA_HELPER)
    write(root, "kforge.yaml", "version: 1\nkernels:\n  viahelper:\n    file: viahelper.py\n    entry: kernel\n"
                               "    inputs: ref.py:make_inputs\n    shapes: [{n: 32}]\n    targets: [cpu]\n")
    write(root, "policy.yml", POLICY)
    commit_all(root, "base")
    write(root, "helper.py", "def scale(x):\n    return x * 2.0 + 1.0\n")
    commit_all(root, "head: the helper changes what the kernel computes")
    report = run_gate(root, "HEAD~1", policy=load_policy(root / "policy.yml"), use_cache=False)
    (entry,) = report.kernels
    assert entry.id == "viahelper" and entry.touched_by == ["helper.py"]
    assert entry.verdict == "incorrect", entry.reason
    assert report.exit_code == 1


# ------------------------------------------------------------------------------------ required targets

@pytest.fixture(scope="module")
def gpu_required_repo(tmp_path_factory):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the required target would be measured, not skipped")
    root = tmp_path_factory.mktemp("gate-required") / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "both.py", PLAIN)
    write(root, "gpuonly.py", PLAIN)
    text = manifest(["both", "gpuonly"], n=64)
    text = text.replace("    file: both.py\n", "    file: both.py\n    targets: [cpu, cuda]\n", 1)
    lines, seen = [], None
    for line in text.splitlines():  # the manifest helper writes `targets: [cpu]` for each kernel: drop it
        seen = line.strip().rstrip(":") if line.startswith("  ") and not line.startswith("    ") else seen
        if line.strip() == "targets: [cpu]":
            line = "    targets: [cuda]" if seen == "gpuonly" else None
        if line is not None:
            lines.append(line)
    write(root, "kforge.yaml", "\n".join(lines) + "\n")
    write(root, "policy.yml", POLICY + "required_targets: [cuda]\n")
    write(root, "strict-targets.yml", POLICY.replace("gate: {threshold: 0.25, confidence: 0.95}",
                                                     "gate: {threshold: 0.25, confidence: 0.95, require_all_targets: true}")
          + "required_targets: [cuda]\n")
    commit_all(root, "base")
    write(root, "both.py", "def kernel(x, y):\n    return y + x * 2.0\n")  # same result, same speed
    write(root, "gpuonly.py", "def kernel(x, y):\n    return y + x * 2.0\n")
    commit_all(root, "rewrite both kernels")
    return root


@pytest.mark.slow
def test_unmeasured_required_target_is_reported_and_does_not_fail_by_default(gpu_required_repo, tmp_path):
    root = gpu_required_repo
    summary = tmp_path / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    cache = tmp_path / "cache"
    proc = cli("gate", "--base", "HEAD~1", "--policy", "policy.yml", "--json", str(tmp_path / "r.json"),
               "--cache-dir", str(cache), cwd=root, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    report = json.loads((tmp_path / "r.json").read_text())
    kernels = by_id(report)
    assert kernels["both"]["verdict"] == "pass" and kernels["both"]["target"] == "cpu", kernels["both"]["reason"]
    assert kernels["both"]["required"] == {"cuda": "skipped (needs cuda)"}
    assert kernels["gpuonly"]["verdict"] == "skipped" and kernels["gpuonly"]["required"] == {"cuda": "skipped (needs cuda)"}
    assert report["required_targets"] == {"targets": ["cuda"], "require_all_targets": False,
                                          "unmeasured": {"cuda": ["both", "gpuonly"]}, "fails": False}
    assert "required cuda: skipped (needs cuda)" in proc.stdout  # the table's notes
    assert "Not measured on this runner: cuda for both, gpuonly: this does not fail the run" in proc.stdout
    text = summary.read_text()
    assert "### kforge-bot gate: passed" in text and "required cuda: skipped (needs cuda)" in text
    assert "Required targets (policy): cuda." in text
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("::warning file=")]
    assert len(warnings) == 2 and not any(line.startswith("::error") for line in proc.stdout.splitlines())

    # --require-all-targets: the same results (from the cache) now fail the run
    proc = cli("gate", "--base", "HEAD~1", "--policy", "policy.yml", "--require-all-targets", "--json", "-",
               "--cache-dir", str(cache), cwd=root, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout[proc.stdout.index("{"):proc.stdout.rindex("}") + 1])
    assert by_id(report)["both"]["cached"] and report["required_targets"]["fails"] is True
    assert "::error file=both.py,title=kforge gate%3A both not measured on cuda::" in proc.stderr

    # the policy's gate.require_all_targets does the same
    strict_summary = tmp_path / "strict.md"
    proc = cli("gate", "--base", "HEAD~1", "--policy", "strict-targets.yml", "--cache-dir", str(cache), cwd=root,
               env={"GITHUB_STEP_SUMMARY": str(strict_summary)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "kforge-bot gate: failed - 1 pass, 1 skipped; required target(s) not measured here: cuda" in proc.stdout
    assert "Not measured on this runner: cuda for both, gpuonly: this fails the gate (require_all_targets)." in proc.stdout
    text = strict_summary.read_text()
    assert "### kforge-bot gate: failed" in text
    assert "required cuda: skipped (needs cuda) - fails the gate (require_all_targets)" in text


def test_a_run_whose_every_changed_kernel_was_skipped_fails_unless_the_policy_says_pass(tmp_path):
    """A gate job on a runner without the kernels' device checked nothing: green forever, before. Now one line
    says so and the run fails (policy gate.all_skipped: fail, the default); `pass` keeps it green."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the kernel would be measured, not skipped")
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "gpuonly.py", PLAIN)
    write(root, "kforge.yaml", manifest(["gpuonly"], n=64).replace("targets: [cpu]", "targets: [cuda]"))
    write(root, "policy.yml", POLICY)
    write(root, "lenient.yml", POLICY.replace("gate: {threshold: 0.25, confidence: 0.95}",
                                              "gate: {threshold: 0.25, confidence: 0.95, all_skipped: pass}"))
    commit_all(root, "base")
    write(root, "gpuonly.py", "def kernel(x, y):\n    return y + x * 2.0\n")
    commit_all(root, "head")
    proc = cli("gate", "--base", "HEAD~1", "--policy", "policy.yml", "--json", str(tmp_path / "r.json"), cwd=root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = ("nothing was checked: all 1 changed kernel(s) were skipped here (none of the kernel's targets (cuda) is "
            "on this machine); run the gate where they run, or set gate.all_skipped: pass")
    assert json.loads((tmp_path / "r.json").read_text())["nothing_measured"] == line
    assert f"Error: {line}" in proc.stdout.replace("\n", " ") or f"Error: {line}" in proc.stdout, proc.stdout
    lenient = cli("gate", "--base", "HEAD~1", "--policy", "lenient.yml", cwd=root)
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr


# ---------------------------------------------------------- the "done when", as a new user would


@pytest.mark.slow
def test_new_user_with_the_bundled_examples(tmp_path):
    """A fresh repository holding the bundled examples (examples/kforge.yaml: the CPU kernel
    matmul_bias_relu_cpu, built with the C compiler, next to GPU kernels this machine does not
    run). With the shipped default policy and no flags beyond --base (and a shorter --time-budget):
    1. a commit that makes matmul_bias_relu_cpu 3x slower fails the gate: exit 1, a line with the
       regression and the CPU threshold, an `::error file=...` annotation on the kernel file;
    2. an unrelated commit passes (exit 0, nothing measured);
    3. the pre-commit hook, installed with `pre-commit install` as the README shows, blocks a commit
       that breaks the kernel's correctness (the commit does not happen)."""
    import shutil

    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler: the CPU example builds with one")
    root = tmp_path / "kernels"
    shutil.copytree(PACKAGE_ROOT / "examples", root, ignore=shutil.ignore_patterns("__pycache__"))
    write(root, "README.md", "# our kernels\n")
    init_repo(root)
    commit_all(root, "kernels, with kforge-bot's examples")
    kernel = root / "cpu" / "matmul_bias_relu.py"
    original = kernel.read_text()
    call = ("    _LIB.matmul_bias_relu(a.data_ptr(), w.data_ptr(), bias.data_ptr(), out.data_ptr(), M, N, K, THREADS)\n")
    assert call in original
    kernel.write_text(original.replace(call, "    for _ in range(3):  # recompute: 3x the work\n    " + call))
    commit_all(root, "matmul_bias_relu: 3x the work")

    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    # --time-budget 4 (default: the policy's 10 s) is the one flag beyond --base: it keeps this test under a
    # minute on a 2-core machine, and a 3x slowdown needs no more.
    proc = cli("gate", "--base", "HEAD~1", "--time-budget", "4", "--json", str(tmp_path / "slow.json"), cwd=root,
               env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    report = json.loads((tmp_path / "slow.json").read_text())
    (entry,) = report["kernels"]  # the GPU kernels and the KernelBench files are unchanged
    assert entry["id"] == "matmul_bias_relu_cpu" and entry["verdict"] == "regression", entry["reason"]
    assert entry["target"] == "cpu" and entry["threshold"] == 0.05  # the default policy's CPU threshold
    # A verdict, not a measured ratio: on a loaded 2-core machine 3x the work read anywhere from 2x to 9x.
    assert entry["head_ms"] > entry["base_ms"] * (1 + entry["threshold"])
    assert sorted(report["unchanged"]) == ["kernelbench/softmax_problem.py", "matmul_bias_relu_triton", "rmsnorm_cuda",
                                           "rmsnorm_triton", "softmax_triton", "swiglu_triton"]
    assert report["workloads"] == []  # the examples' workloads use none of the changed files
    assert "kforge-bot gate: failed" in proc.stdout
    # Into a pipe (a CI log): one whole line per kernel, not a table padded or folded to a width.
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("matmul_bias_relu_cpu: "))
    assert "x slower" in line and "threshold 5% (cpu)" in line and "│" not in proc.stdout
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1 and errors[0].startswith(
        "::error file=cpu/matmul_bias_relu.py,title=kforge gate%3A matmul_bias_relu_cpu regression::"), errors
    summary = (tmp_path / "summary.md").read_text()
    assert "### kforge-bot gate: failed" in summary and "| matmul_bias_relu_cpu |" in summary
    assert "**regression**" in summary

    write(root, "README.md", "# our kernels\n\nNow with a regression gate.\n")
    commit_all(root, "docs")
    proc = cli("gate", "--base", "HEAD~1", "--json", str(tmp_path / "docs.json"), cwd=root, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "docs.json").read_text())
    assert report["kernels"] == [] and "matmul_bias_relu_cpu" in report["unchanged"]
    assert "kforge-bot gate: passed" in proc.stdout and "::error" not in proc.stdout

    pytest.importorskip("pre_commit", reason="pre-commit is in the dev extras: pip install pre-commit")
    # The README's hook for a repository that brings its own torch (language: system); the entry runs
    # this checkout's kforge-bot with the interpreter running the tests.
    write(root, ".pre-commit-config.yaml",
          "repos:\n  - repo: local\n    hooks:\n"
          f"      - {{id: kforge-check, name: kforge-check, entry: '{sys.executable} -m kforge_bot.cli precommit',\n"
          "         language: system, files: '(\\.py|(^|/)kforge\\.yaml|(^|/)policies/[^/]+\\.ya?ml)$'}\n")
    commit_all(root, "pre-commit hook")
    hook_env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PRE_COMMIT"))}
    hook_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), hook_env.get("PYTHONPATH", "")) if p)
    hook_env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=root, env=hook_env, check=True,
                   capture_output=True, timeout=120)
    head_before = git(root, "rev-parse", "HEAD")
    broken = kernel.read_text().replace("out[(long)(i0 + i) * N + j0 + j] = v > 0.0f ? v : 0.0f;",
                                        "out[(long)(i0 + i) * N + j0 + j] = v;  /* relu dropped */")
    assert broken != kernel.read_text()
    kernel.write_text(broken)
    git(root, "add", "cpu/matmul_bias_relu.py")
    proc = subprocess.run(["git", "commit", "-m", "drop the relu"], cwd=root, env={**hook_env, **_git_identity()},
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "kforge-check" in out and "Failed" in out
    assert "FAILED: cpu/matmul_bias_relu.py: kernel 'matmul_bias_relu_cpu' is incorrect" in out
    assert git(root, "rev-parse", "HEAD") == head_before  # the commit was blocked


def _git_identity() -> dict[str, str]:
    from fakes.gitrepos import HUMAN

    return dict(HUMAN)


@pytest.mark.slow
def test_a_pull_request_that_changes_only_a_data_file_the_kernel_reads_is_measured(tmp_path):
    """Attack (issue 28, class 3): the kernel's file is untouched; the data file it reads by literal path makes
    it wrong. Reported `unchanged`, it would pass."""
    root = tmp_path / "repo"
    init_repo(root)
    write(root, "ref.py", REF)
    write(root, "weights.py", "import os\n\nwith open(os.path.join(os.path.dirname(__file__), 'data', 'scale.txt')) "
                              "as handle:\n    SCALE = float(handle.read())\n")
    write(root, "data/scale.txt", "2.0\n")
    write(root, "scaled.py", "from weights import SCALE\n\n\ndef kernel(x, y):\n    return x * SCALE + y\n")
    write(root, "kforge.yaml", manifest(["scaled"], n=32))
    write(root, "policy.yml", POLICY)
    commit_all(root, "base")
    write(root, "data/scale.txt", "2.5\n")
    commit_all(root, "head: only the data changes")
    report = run_gate(root, "HEAD~1", policy=load_policy(root / "policy.yml"), use_cache=False)
    assert report.unchanged == []
    (entry,) = report.kernels
    assert entry.touched_by == ["data/scale.txt"] and entry.verdict == "incorrect", entry.reason
    assert report.exit_code == 1


# A head that tells the comparison from a run of its own (before issue 28 the baseline's module name carried the
# base's digest, its own the head's) and fails there with a fake device error; anywhere else it is 20x slower.
BLAME_THE_BASE = """\
import sys


def _in_the_comparison():
    mine = __name__.rsplit("_", 1)[-1]
    return any(n.startswith("_kforge_baseline_") and not n.endswith(mine) for n in sys.modules)


def kernel(x, y):
    if _in_the_comparison():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    for _ in range(20):
        out = x * 2.0 + y
    return out
"""


@pytest.mark.slow
def test_a_head_that_crashes_only_in_the_comparison_fails_the_gate(tmp_path):
    """Attack (issue 28, class 4): the gate ran the head alone after a crash in the comparison and passed it."""
    root = one_kernel_repo(tmp_path / "repo", policy=POLICY)
    write(root, "k.py", BLAME_THE_BASE)
    commit_all(root, "head")
    report = run_gate(root, "HEAD~1", policy=load_policy(root / "policy.yml"), use_cache=False)
    (entry,) = report.kernels
    assert entry.verdict in ("error", "regression"), entry.reason
    assert "base version failed" not in entry.reason and report.exit_code == 1


# ------------------------------------------------------------------------------ GPU MODE problems, unchanged

@pytest.mark.slow
def test_a_gpumode_problem_folder_is_gated_as_it_is(tmp_path):
    """A GPU MODE problem in its own layout (task.yml, reference.py, ../utils.py): its submission.py is the kernel
    as written. A head whose submission computes something else is incorrect against the problem's reference."""
    import shutil
    from pathlib import Path

    root = tmp_path / "repo"
    init_repo(root)
    shutil.copytree(Path(__file__).parents[1] / "data" / "gpumode", root / "gm")
    write(root, "policy.yml", POLICY)
    commit_all(root, "base")
    submission = root / "gm" / "scaled_add_py" / "submission.py"
    submission.write_text(submission.read_text().replace("alpha=2", "alpha=3"))
    commit_all(root, "head: the submission computes relu(a + 3b)")
    report = run_gate(root, "HEAD~1", policy=load_policy(root / "policy.yml"), use_cache=False)
    (entry,) = report.kernels
    assert entry.id == "gm/scaled_add_py" and entry.verdict == "incorrect", entry.reason
    assert report.exit_code == 1


def test_a_manifest_over_the_kernel_cap_fails_the_gate_on_base_or_head(tmp_path):
    """Over the cap, the base's manifest was noted and its kernels counted absent: the gate now stops with the
    cap's line, whichever side has it."""
    from kforge_bot.errors import KforgeError

    root = one_kernel_repo(tmp_path / "repo")
    write(root, "kforge.yaml", manifest([f"k{i}" for i in range(257)]))
    commit_all(root, "over the cap")
    with pytest.raises(KforgeError, match="257 kernels, over the cap of 256"):  # the head's
        run_gate(root, "HEAD~1", policy=load_policy(None), measure=False, use_cache=False)
    write(root, "kforge.yaml", manifest(["k"]))
    commit_all(root, "back under it")
    with pytest.raises(KforgeError, match="base: kforge.yaml: kernels: 257 kernels, over the cap of 256"):
        run_gate(root, "HEAD~1", policy=load_policy(None), measure=False, use_cache=False)
