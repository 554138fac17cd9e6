"""A manifest's workloads: section read, and each bad entry a one-line error naming the manifest and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import read_manifest
from kforge_bot.workloads.spec import load_workloads

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOOD = {"file": "prog.py", "entry": "decode", "unit": "tokens/s", "items": 8, "compare": {"tokens": 8}}


def manifest_in(tmp_path: Path) -> Path:
    program = "def decode(m):\n    return m\n\n\ndef make_inputs(seed, device):\n    return 1\n"
    (tmp_path / "prog.py").write_text(program)
    path = tmp_path / "kforge.yaml"
    path.write_text("version: 1\nkernels: {}\n")
    return path


def test_the_examples_workloads_load_with_their_modules_and_import_roots() -> None:
    path = EXAMPLES / "kforge.yaml"
    specs = load_workloads(path, read_manifest(path)["workloads"])
    decode = specs["tinylm_decode"]
    assert decode.module == "tinylm.workload_triton" and decode.inputs_symbol == "make_inputs"
    assert decode.compare == {"tokens": 32} and decode.unit == "tokens/s" and decode.items == 32
    assert decode.sys_paths == [str(EXAMPLES / "triton"), str(EXAMPLES)]
    assert specs["tinylm_prefill"].compare == {"logits": {"atol": 0.05, "rtol": 0.05}}


def test_a_good_entry_loads(tmp_path: Path) -> None:
    spec = load_workloads(manifest_in(tmp_path), {"d": GOOD})["d"]
    assert (spec.file, spec.entry, spec.inputs_file, spec.seed, spec.warmup, spec.repeats) == \
        ("prog.py", "decode", "prog.py", 0, 2, 5)


@pytest.mark.parametrize("change, message", [
    ({"unit": "tokens per second"}, "workloads.d.unit: expected one of tokens/s, samples/s, ms/step"),
    ({"compare": {"tokens": 0}}, "workloads.d.compare.tokens: expected an integer from 1"),
    ({"compare": {"logits": {"atol": -1}}}, "workloads.d.compare.logits: expected {atol: number, rtol: number}"),
    ({"compare": "exact"}, "workloads.d.compare: expected one of tokens: N or logits"),
    ({"file": "missing.py"}, "workloads.d.file: file 'missing.py' does not exist"),
    ({"file": "../prog.py"}, "outside the manifest's folder"),
    ({"inputs": "prog.py"}, None),
    ({"inputs": "prog.py:"}, "workloads.d.inputs: expected 'file.py:function'"),
    ({"args": {"seed": 3}}, "workloads.d.args: seed and device are passed by the bot"),
    ({"targets": ["tpu"]}, "workloads.d.targets: expected a list drawn from"),
    ({"repeats": 0}, "workloads.d.repeats: expected an integer from 1 to 1000"),
    ({"tolerance": 1}, "workloads.d: unknown key 'tolerance'"),
])
def test_a_bad_entry_is_a_one_line_error_naming_the_manifest(tmp_path: Path, change: dict, message: str | None) -> None:
    path = manifest_in(tmp_path)
    if message is None:
        load_workloads(path, {"d": {**GOOD, **change}})
        return
    with pytest.raises(KforgeError) as raised:
        load_workloads(path, {"d": {**GOOD, **change}})
    text = str(raised.value)
    assert message in text and "kforge.yaml" in text and "\n" not in text


def test_a_per_second_unit_needs_its_items_and_a_missing_key_is_named(tmp_path: Path) -> None:
    path = manifest_in(tmp_path)
    with pytest.raises(KforgeError, match="workloads.d.items: a tokens/s workload says how many tokens"):
        load_workloads(path, {"d": {k: v for k, v in GOOD.items() if k != "items"}})
    with pytest.raises(KforgeError, match="workloads.d: missing required key 'compare'"):
        load_workloads(path, {"d": {k: v for k, v in GOOD.items() if k != "compare"}})
    with pytest.raises(KforgeError, match="workloads: expected a mapping"):
        load_workloads(path, ["d"])


def test_the_manifest_reader_accepts_a_workloads_section_and_still_names_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "kforge.yaml"
    path.write_text("version: 1\nkernels: {k: {file: k.py, entry: k, inputs: 'k.py:i'}}\nworkload: {}\n")
    with pytest.raises(KforgeError, match="unknown top-level key 'workload'.*did you mean 'workloads'"):
        read_manifest(path)
