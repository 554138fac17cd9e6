"""Strict YAML loading and typed field checks for the project's own config files.

Runner facts and policies are read through here so that every mistake in them becomes one
`KforgeError` line naming the file and the key path (`gate.rules[1].threshold: expected ...`).
YAML's own leniency is narrowed: duplicate keys are an error (PyYAML silently keeps the last),
a boolean never passes for a number (bool is an int in Python), and anchors and aliases are refused:
files a pull request can edit (kforge.yaml, policies) must not expand into more than they hold (a
739-byte file of nested aliases grew past 1.5 GB once the gate walked it). A file over MAX_YAML_BYTES
is refused before it is parsed. Files are read by kforge_bot.config.reader (the one reader of files a pull
request controls), which parses YAML with `load_yaml_text`.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Iterable, NoReturn

import yaml

from kforge_bot.errors import KforgeError


MAX_YAML_BYTES = 1 << 20  # far above any real manifest or policy; bounds what parsing one can cost


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys, anchors and aliases."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            what = "aliases" if isinstance(event, yaml.AliasEvent) else "anchors"
            raise yaml.composer.ComposerError(None, None, f"YAML {what} (&name, *name) are not allowed here",
                                              event.start_mark)
        return super().compose_node(parent, index)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (line {mark.line + 1})", mark
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml_text(text: str, path: str | Path) -> Any:
    if len(text) > MAX_YAML_BYTES:
        raise KforgeError(f"too large for a configuration file ({len(text)} characters, at most {MAX_YAML_BYTES})",
                          path=path, hint="split it, or remove what is not configuration")
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:  # PyYAML composes nested collections recursively: `[[[[...` is no configuration
        raise KforgeError("not valid YAML (nested too deeply)", path=path, hint="flatten it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        hint = "write the values out" if "are not allowed" in str(problem) else "fix the YAML syntax"
        raise KforgeError(f"not valid YAML ({where}{problem})", path=path, hint=hint) from None


def did_you_mean(word: str, allowed: Iterable[str]) -> str:
    """"did you mean 'shapes'? " for a near miss among `allowed`, else ""."""
    close = difflib.get_close_matches(word, list(allowed), n=1, cutoff=0.75)  # "gpu" is not "cpu"
    return f"did you mean {close[0]!r}? " if close else ""


def describe(value: Any) -> str:
    """How a wrong value is quoted in an error message."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def join(key: str, child: str | int) -> str:
    if isinstance(child, int):
        return f"{key}[{child}]"
    return f"{key}.{child}" if key else child


class Checker:
    """Typed readers that fail with `<file>: <key.path>: expected ..., got ...`."""

    def __init__(self, path: str | Path):
        self.path = str(path)

    def fail(self, key: str, message: str, hint: str | None = None) -> NoReturn:
        raise KforgeError(f"{key}: {message}" if key else message, path=self.path, hint=hint)

    def expected(self, key: str, what: str, value: Any) -> NoReturn:
        self.fail(key, f"expected {what}, got {describe(value)}")

    def mapping(self, value: Any, key: str, allowed: Iterable[str] | None = None,
                required: Iterable[str] = ()) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.expected(key, "a mapping", value)
        for k in value:
            if not isinstance(k, str):
                self.fail(key, f"keys must be strings, got {describe(k)}")
        if allowed is not None:
            allowed_list = list(allowed)
            for k in value:
                if k not in allowed_list:
                    self.fail(join(key, k), "unknown key",
                              hint=f"{did_you_mean(k, allowed_list)}allowed here: {', '.join(allowed_list)}")
        for k in required:
            if k not in value:
                self.fail(join(key, k), "missing (required)")
        return value

    def string(self, value: Any, key: str, choices: Iterable[str] | None = None, nonempty: bool = True) -> str:
        if not isinstance(value, str) or (nonempty and not value.strip()):
            self.expected(key, "a non-empty string" if nonempty else "a string", value)
        if choices is not None:
            options = list(choices)
            if value not in options:
                self.expected(key, "one of " + ", ".join(options), value)
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            self.expected(key, "true or false", value)
        return value

    def integer(self, value: Any, key: str, minimum: int | None = None, maximum: int | None = None) -> int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
            return value
        self.expected(key, _range_text("an integer", minimum, maximum), value)

    def number(self, value: Any, key: str, minimum: float | None = None, maximum: float | None = None,
               exclusive_minimum: bool = False) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
        if ok:
            low_ok = minimum is None or (value > minimum if exclusive_minimum else value >= minimum)
            if low_ok and (maximum is None or value <= maximum):
                return float(value)
        if minimum is not None and exclusive_minimum and maximum is None:
            what = f"a number greater than {_fmt(minimum)}"
        else:
            what = _range_text("a number", minimum, maximum)
        self.expected(key, what, value)

    def string_list(self, value: Any, key: str, choices: Iterable[str] | None = None,
                    nonempty: bool = False) -> list[str]:
        if not isinstance(value, list):
            self.expected(key, "a list of strings", value)
        if nonempty and not value:
            self.fail(key, "expected at least one entry, got an empty list")
        return [self.string(item, join(key, i), choices) for i, item in enumerate(value)]


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _range_text(kind: str, minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"{kind} between {_fmt(minimum)} and {_fmt(maximum)}"
    if minimum is not None:
        return f"{kind} of at least {_fmt(minimum)}"
    if maximum is not None:
        return f"{kind} of at most {_fmt(maximum)}"
    return kind
