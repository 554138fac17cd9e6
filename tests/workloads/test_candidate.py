"""`optimize --workload`: a candidate in place of the kernel's file, end to end, and the name checked before a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.gate_repos import cli
from kforge_bot.config.policy import Policy
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import load_spec
from kforge_bot.workloads.candidate import candidate_end_to_end, find_workload

MANIFEST = """\
version: 1
kernels:
  scale:
    file: ops/scale.py
    entry: scale
    inputs: ops/scale.py:make_inputs
    shapes: [{n: 8}]
    targets: [cpu]
workloads:
  model:
    file: model.py
    entry: run
    args: {n: 8}
    unit: ms/step
    compare: {logits: {atol: 0.001, rtol: 0.0}}
    warmup: 1
    repeats: 2
    targets: [cpu]
"""
KERNEL = """\
import torch


def scale(x):
    return x * 2.0


def make_inputs(n):
    return (torch.randn(n),)
"""
MODEL = """\
import torch

from ops.scale import scale


def make_inputs(*, seed, device, n):
    return (torch.arange(n, dtype=torch.float32),)


def run(x):
    return scale(x) + 1.0
"""


def project(tmp_path: Path) -> Path:
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "scale.py").write_text(KERNEL)
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "kforge.yaml").write_text(MANIFEST)
    return tmp_path / "kforge.yaml"


@pytest.mark.slow
def test_a_candidate_that_changes_the_models_output_is_incorrect_end_to_end(tmp_path: Path) -> None:
    spec = load_spec(project(tmp_path), "scale")
    candidate = KERNEL.replace("x * 2.0", "x * 2.5")
    policy = Policy()
    row = candidate_end_to_end(spec, find_workload(spec, "model"), candidate, "cpu", policy)
    assert row.verdict == "incorrect" and "logits differ from the base's" in row.reason
    assert row.kernels == ["scale"] and row.threshold == policy.gate.workloads.threshold_for("cpu")


def test_an_unknown_workload_is_named_before_any_run(tmp_path: Path) -> None:
    manifest = project(tmp_path)
    with pytest.raises(KforgeError, match=r"no workload named 'modl' \(have: model\)"):
        find_workload(load_spec(manifest, "scale"), "modl")
    proc = cli("optimize", str(manifest), "--kernel", "scale", "--workload", "modl", "--iterations", "1",
               cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "no workload named 'modl'" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("optimize", str(manifest), "--kernel", "scale", "--workload-accept", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "--workload-accept needs --workload NAME" in proc.stderr
