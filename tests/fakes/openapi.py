"""Validate HTTP responses against GitHub's OpenAPI description (@octokit/openapi, api.github.com).

The description is OpenAPI 3.0: its schemas are JSON Schema (draft 4 family) plus `nullable`.
`nullable: true` is rewritten into JSON Schema (`type: [T, "null"]`, or `anyOf: [.., null]`), then
each response body is checked with `jsonschema` (Draft4Validator) with every `$ref` resolved inside
the document through `referencing`. Formats (uri, date-time) are not checked.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from fakes.webhooks import node_file

SPEC_FILE = "@octokit/openapi/generated/api.github.com.json"
_URI = "https://kforge.test/api.github.com.json"


def _nullable_to_jsonschema(node: Any) -> Any:
    if isinstance(node, list):
        return [_nullable_to_jsonschema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable_to_jsonschema(v) for k, v in node.items()}
    if out.pop("nullable", False) is True:
        if "type" in out and not any(k in out for k in ("$ref", "anyOf", "oneOf", "allOf")):
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = [*types, "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


@functools.lru_cache(maxsize=1)
def spec() -> dict[str, Any]:
    return json.loads(node_file(SPEC_FILE).read_text())


@functools.lru_cache(maxsize=1)
def _registry():
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT4

    converted = {"components": _nullable_to_jsonschema(spec()["components"]),
                 "paths": _nullable_to_jsonschema(spec()["paths"])}
    return Registry().with_resource(_URI, Resource(contents=converted, specification=DRAFT4))


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def response_schema_pointer(template: str, method: str, status: int) -> str | None:
    """JSON pointer (into the converted document) of the documented JSON body of this response,
    following a `$ref` into components/responses. None when the spec documents no JSON body."""
    op = spec()["paths"][template][method.lower()]
    response = op["responses"].get(str(status))
    if response is None:
        return None
    base = ("paths", template, method.lower(), "responses", str(status))
    if "$ref" in response:
        name = response["$ref"].rsplit("/", 1)[-1]
        response = spec()["components"]["responses"][name]
        base = ("components", "responses", name)
    if "application/json" not in response.get("content", {}):
        return None
    return "#/" + _pointer(*base, "content", "application/json", "schema")


def validate_response(template: str, method: str, status: int, body: Any) -> list[str]:
    """Schema errors of `body` as the response `status` of `method template` (empty: valid).

    An error status the operation does not document is checked against `basic-error`, the body
    GitHub sends for all errors; an undocumented success status is itself an error.
    """
    from jsonschema import Draft4Validator

    if template not in spec()["paths"] or method.lower() not in spec()["paths"][template]:
        return [f"{method} {template} is not in GitHub's OpenAPI description"]
    pointer = response_schema_pointer(template, method, status)
    if pointer is None:
        if status == 204 and body is None:
            return []
        if status >= 400:
            pointer = "#/components/schemas/basic-error"
        else:
            return [f"{method} {template} does not document a JSON {status} response"]
    validator = Draft4Validator({"$ref": _URI + pointer}, registry=_registry())
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    return [f"{method} {template} {status}: at /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
            for e in errors[:10]]
