"""Which device kind a kernel is measured on, and the policy's required targets."""

from __future__ import annotations

from dataclasses import replace as dc_replace

import pytest
from fakes.gate_repos import tiny_spec_in

from kforge_bot.config.policy import parse_policy
from kforge_bot.errors import KforgeError
from kforge_bot.gate.required_targets import required_status, required_targets
from kforge_bot.targets import TargetChoice, choose_target


@pytest.fixture()
def tiny_spec(tmp_path):
    return tiny_spec_in(tmp_path)


def test_required_targets_resolve_and_apply_only_where_a_kernel_runs(tiny_spec):
    policy = parse_policy({"required_targets": ["cuda", "h200", "cpu"]}, "p.yml")
    req = required_targets(policy)
    assert [(r.requested, r.kind, r.runner) for r in req] == [("cuda", "cuda", None), ("h200", "cuda", "h200"),
                                                          ("cpu", "cpu", None)]
    with pytest.raises(KforgeError) as err:
        required_targets(parse_policy({"required_targets": ["tpu9000"]}, "p.yml"))
    assert "p.yml: required_targets: unknown target 'tpu9000'" in str(err.value)

    auto = choose_target("auto")
    both = dc_replace(tiny_spec, targets=("cpu", "cuda"))
    assert required_status(req, both, "cpu", "some cpu", auto) == {
        "cuda": "skipped (needs cuda)", "h200": "skipped (needs h200: NVIDIA H200 SXM)", "cpu": "measured"}
    cpu_only = dc_replace(tiny_spec, targets=("cpu",))
    assert required_status(req, cpu_only, "cpu", "some cpu", auto) == {"cpu": "measured"}  # cuda does not apply
    assert required_status(req, both, None, "", auto)["cpu"] == "skipped (needs cpu)"
    # a runner class is measured only on a device of that class
    on_h200 = required_status(req, both, "cuda", "NVIDIA H200", auto)
    assert on_h200["h200"] == "measured" and on_h200["cuda"] == "measured"
    on_a100 = required_status(req, both, "cuda", "NVIDIA A100-SXM4-80GB", auto)
    assert on_a100["h200"].startswith("skipped (needs h200") and on_a100["cuda"] == "measured"
    assert required_status(req, both, "cuda", "NVIDIA A100", TargetChoice("h200", "cuda", "h200"))["h200"] == "measured"
