"""The policy file's JSON Schema (kforge_bot.config.schema): generated into policies/schema.json, and in
agreement with the loader (kforge_bot.config.policy) on what is valid."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from kforge_bot.config import policy as pol
from kforge_bot.config.schema import json_schema
from kforge_bot.errors import KforgeError

REPO = Path(__file__).resolve().parents[2]


def test_schema_file_is_generated_from_the_code():
    on_disk = json.loads((REPO / "policies" / "schema.json").read_text())
    assert on_disk == json_schema(), "regenerate: kforge-bot policy schema > policies/schema.json"


VALID_DOCS = [
    {},
    {"gate": {"threshold": 0.05, "rules": [{"kernel": "x", "skip": True}]}},
    {"gate": {"threshold": {"cpu": 0.1}, "require_all_targets": True,
              "rules": [{"kernel": "x", "threshold": {"cuda": 0.05, "mps": 0.1}}]}},
    {"trust": {"allowed_associations": ["OWNER"], "allow_forks": True}, "languages": ["sycl"]},
    {"gate": {"rules": [{"kernel": "mm", "shape_sets": {"0": {"informational": True, "reason": "warm-up"},
                                                        "2": {"threshold": {"cpu": 0.2}}}}]}},
]
INVALID_DOCS = [
    {"gate": {"threshold": "fast"}},
    {"gate": {"threshold": {}}},
    {"gate": {"threshold": {"tpu": 0.02}}},
    {"gate": {"threshold": {"cpu": 1.5}}},
    {"gate": {"require_all_targets": "yes"}},
    {"gate": {"rules": [{"kernel": "x", "threshold": {"cpu": -1}}]}},
    {"gate": {"rules": [{"threshold": 0.1}]}},
    {"gate": {"rules": [{"path": "a"}]}},
    {"gate": {"confidence": 1}},
    {"min_speedup": 0.5},
    {"budgets": {"iterations": 0}},
    {"languages": ["fortran"]},
    {"trust": {"allowed_associations": ["ADMIN"]}},
    {"unknown": 1},
    {"kernel_paths": ["/abs"]},
    {"allow_framework_fallback": "no"},
    {"gate": {"rules": [{"kernel": "mm", "shape_sets": {"first": {"informational": True}}}]}},
    {"gate": {"rules": [{"kernel": "mm", "shape_sets": {"0": {"reason": "says nothing"}}}]}},
    {"gate": {"rules": [{"kernel": "mm", "shape_sets": {"0": {"informational": False}}}]}},
    {"gate": {"rules": [{"kernel": "mm", "shape_sets": {"0": {"threshold": 2}}}]}},
    {"gate": {"rules": [{"kernel": "mm", "shape_sets": {}}]}},
]


@pytest.mark.parametrize("doc", VALID_DOCS)
def test_schema_and_loader_accept_the_same_valid_documents(doc):
    jsonschema.validate(doc, json_schema())
    pol.parse_policy(doc, "doc")


@pytest.mark.parametrize("doc", INVALID_DOCS)
def test_schema_and_loader_reject_the_same_invalid_documents(doc):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json_schema())
    with pytest.raises(KforgeError):
        pol.parse_policy(doc, "doc")


def test_shipped_policies_pass_the_json_schema():
    for path in pol.shipped_policies().values():
        jsonschema.validate(yaml.safe_load(path.read_text()), json_schema())
