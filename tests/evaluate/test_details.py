"""An evaluation's details (evaluate.wire.details): every key the bot sets or reads is one the type declares, and
the JSON they serialize to is the mapping as it was set (the result cache and the gate's JSON keep their shape)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from kforge_bot.evaluate.wire.details import Details
from kforge_bot.evaluate.wire.result import EvalResult

PACKAGE = Path(__file__).resolve().parents[2] / "kforge_bot"


def _details_keys(path: Path) -> set[str]:
    """The literal keys a module uses on an EvalResult's details: `x.details["k"]`, `x.details.get("k")` (and
    setdefault, pop), `EvalResult(..., details={"k": ...})`, `x.details = {"k": ...}`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        literal: ast.expr | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "details":
            found.update(_strings([node.slice]))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "setdefault", "pop") and isinstance(node.func.value, ast.Attribute)
              and node.func.value.attr == "details" and node.args):
            found.update(_strings(node.args[:1]))
        elif isinstance(node, ast.keyword) and node.arg == "details":
            literal = node.value
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "details"
                                                  for t in node.targets):
            literal = node.value
        if isinstance(literal, ast.Dict):
            found.update(_strings([k for k in literal.keys if k is not None]))
    return found


def _strings(nodes: list[ast.expr]) -> set[str]:
    return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_every_key_the_bot_sets_or_reads_in_details_is_declared() -> None:
    declared = set(Details.__optional_keys__) | set(Details.__required_keys__)
    undeclared = {f"{path.relative_to(PACKAGE.parent)}: {key}" for path in sorted(PACKAGE.rglob("*.py"))
                  for key in _details_keys(path) - declared}
    assert not undeclared, "declare these in kforge_bot/evaluate/wire/details.py:\n" + "\n".join(sorted(undeclared))


def test_the_key_rule_sees_every_spelling(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text('def f(result, EvalResult):\n    result.details["a"] = result.details.get("b")\n'
                      '    result.details.setdefault("c", 1)\n    result.details = {"d": 1}\n'
                      '    return EvalResult(details={"e": 2}), other["f"], other.get("g")\n')
    assert _details_keys(sample) == {"a", "b", "c", "d", "e"}


def test_details_serialize_as_the_mapping_they_were_set_as() -> None:
    """The type changes nothing on the way out: the keys set, in the order set, and nothing added."""
    result = EvalResult(verdict="pass", reason="ok", target="cpu",
                        details={"harness_version": "9", "wall_s": 1.5, "log_tail": "", "isolation": "not sandboxed"})
    result.details["timing"] = [{"pairs": 12, "stop_reason": "reached 12 pairs"}]
    result.details["confidence"] = 0.95
    written = json.dumps(result.to_dict())
    assert json.dumps(json.loads(written)["details"]) == json.dumps(
        {"harness_version": "9", "wall_s": 1.5, "log_tail": "", "isolation": "not sandboxed",
         "timing": [{"pairs": 12, "stop_reason": "reached 12 pairs"}], "confidence": 0.95})
    assert json.dumps(EvalResult.from_dict(json.loads(written)).to_dict()) == written


def test_an_entry_written_before_the_type_reads_back_as_it_was() -> None:
    """A cache entry may hold a key no harness writes any more: read back and written again, it is unchanged."""
    old = {"verdict": "crash", "correct": False, "reason": "exited", "target": "cpu", "device_name": "",
           "baseline": None, "candidate": None, "speedup": None, "speedup_ci": None, "correctness": {},
           "profile": {}, "target_info": {}, "per_shape": [],
           "details": {"a_key_of_an_older_harness": [1, 2], "wall_s": 0.5}, "cached": True}
    assert json.dumps(EvalResult.from_dict(json.loads(json.dumps(old))).to_dict()) == json.dumps(old)
