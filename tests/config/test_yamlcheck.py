"""The strict YAML reader and the typed checker behind every manifest and policy error message."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_bot.config.reader import read_yaml as load_yaml_file
from kforge_bot.config.yamlcheck import MAX_YAML_BYTES, Checker, did_you_mean, load_yaml_text
from kforge_bot.errors import KforgeError


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


def test_anchors_aliases_and_size_are_bounded(tmp_path: Path) -> None:
    """Class 8 (issue 28): a 739-byte file of nested aliases drove the gate past 1.5 GB once it was walked. Anchors
    and aliases are refused as they are parsed, before anything is built from them; so is a file over the cap."""
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = tmp_path / "kforge.yaml"
    bomb.write_text("\n".join(levels) + "\n")
    assert len(bomb.read_bytes()) < 800  # expands to 9**9 (387 million) strings when walked
    with pytest.raises(KforgeError) as caught:
        load_yaml_file(bomb)
    assert "YAML anchors (&name, *name) are not allowed" in str(caught.value) and "line 1" in str(caught.value)
    with pytest.raises(KforgeError, match="YAML aliases"):
        load_yaml_text("a: [1]\nb: *a\n", "x.yml")  # an alias whose anchor is missing is refused the same way
    big = tmp_path / "big.yml"
    big.write_text("a: " + "x" * (MAX_YAML_BYTES + 1) + "\n")
    with pytest.raises(KforgeError, match="too large"):
        load_yaml_file(big)


def test_deep_nesting_is_one_line_not_a_crash() -> None:
    with pytest.raises(KforgeError, match="nested too deeply"):
        load_yaml_text("kernels: " + "[" * 5000, "kforge.yaml")
