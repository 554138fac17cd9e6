"""The strict YAML reader and the typed checker behind every manifest and policy error message."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.yamlcheck import Checker, did_you_mean, load_yaml_file, load_yaml_text


def test_a_duplicate_key_is_an_error_naming_the_file_and_line() -> None:
    with pytest.raises(KforgeError) as caught:
        load_yaml_text("a: 1\nb: 2\na: 3\n", "kforge.yaml")
    assert "kforge.yaml" in str(caught.value) and "duplicate key 'a' (line 3)" in str(caught.value)


def test_broken_yaml_says_where(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yml"
    bad.write_text("budgets: [1, 2\n")
    with pytest.raises(KforgeError) as caught:
        load_yaml_file(bad)
    assert "not valid YAML (line" in str(caught.value) and "policy.yml" in str(caught.value)
    with pytest.raises(KforgeError, match="file not found"):
        load_yaml_file(tmp_path / "missing.yml")


def test_near_misses_are_suggested_and_far_ones_are_not() -> None:
    assert did_you_mean("shapez", ["shapes", "file"]) == "did you mean 'shapes'? "
    assert did_you_mean("gpu", ["cpu", "cuda"]) == ""  # one letter off a three-letter word is no near miss


def test_the_checker_names_the_key_path_and_what_it_expected() -> None:
    check = Checker("kforge.yaml")
    assert check.mapping({"file": "x.py"}, "kernels.a", allowed=["file", "entry"]) == {"file": "x.py"}
    with pytest.raises(KforgeError) as caught:
        check.mapping({"fiel": "x.py"}, "kernels.a", allowed=["file", "entry"])
    assert "kernels.a.fiel: unknown key" in str(caught.value) and "did you mean 'file'?" in str(caught.value)
    with pytest.raises(KforgeError, match=r"kernels\.a\.entry: missing \(required\)"):
        check.mapping({}, "kernels.a", required=["entry"])
    with pytest.raises(KforgeError, match=r"seeds: expected an integer between 1 and 16, got 0"):
        check.integer(0, "seeds", minimum=1, maximum=16)
    with pytest.raises(KforgeError, match=r"threshold: expected a number greater than 0, got true"):
        check.number(True, "threshold", minimum=0, exclusive_minimum=True)
    with pytest.raises(KforgeError, match=r"targets\[1\]: expected one of cpu, cuda, got 'tpu'"):
        check.string_list(["cpu", "tpu"], "targets", choices=["cpu", "cuda"])
