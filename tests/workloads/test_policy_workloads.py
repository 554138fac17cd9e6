"""The policy's gate.workloads: its own threshold per target kind, the precision, pairs and seconds; bad values
are one-line errors; it round-trips through the policy's own layout."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kforge_bot.config.policy import DEFAULT_THRESHOLDS, Policy, load_policy, parse_policy
from kforge_bot.errors import KforgeError


def test_defaults_are_the_gate_thresholds_and_a_quarter_of_them_for_the_precision() -> None:
    w = Policy().gate.workloads
    assert w.threshold == DEFAULT_THRESHOLDS
    assert w.precision_for("cuda") == 0.005 and w.precision_for("cpu") == 0.005
    assert (w.min_pairs, w.max_pairs, w.processes) == (6, 40, 3)


def test_a_policy_sets_them_and_they_round_trip(tmp_path: Path) -> None:
    policy = parse_policy({"gate": {"workloads": {"threshold": {"cuda": 0.01}, "precision": 0.002, "max_pairs": 20,
                                                  "budget_s": 60, "processes": 5}}}, "p.yml")
    w = policy.gate.workloads
    assert w.threshold_for("cuda") == 0.01 and w.threshold_for("cpu") == DEFAULT_THRESHOLDS["cpu"]
    assert w.precision_for("cuda") == 0.002 and w.max_pairs == 20 and w.budget_s == 60 and w.processes == 5
    path = tmp_path / "p.yml"
    path.write_text(yaml.safe_dump(policy.to_dict()))
    assert load_policy(path).gate.workloads == w
    path.write_text(yaml.safe_dump(Policy().to_dict()))
    assert load_policy(path).gate.workloads.precision is None


@pytest.mark.parametrize("raw, message", [
    ({"threshold": 2}, "gate.workloads.threshold"),
    ({"precision": 0}, "gate.workloads.precision"),
    ({"min_pairs": 10, "max_pairs": 8}, "gate.workloads.max_pairs: 8 is below min_pairs (10)"),
    ({"pairs": 3}, "gate.workloads"),
    ({"processes": 0}, "gate.workloads.processes"),
])
def test_bad_values_are_one_line_errors(raw: dict, message: str) -> None:
    with pytest.raises(KforgeError) as raised:
        parse_policy({"gate": {"workloads": raw}}, "p.yml")
    assert message in str(raised.value) and "\n" not in str(raised.value)
