"""What of a Markdown text GitHub renders live: everything outside fenced code blocks and code spans (where no link,
image, mention or HTML renders). Attack tests assert that what a pull request wrote never lands there."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1\s*$", re.M | re.S)
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def live_markdown(text: str) -> str:
    """`text` with its fenced blocks and code spans taken out."""
    return _SPAN.sub(" ", _FENCE.sub(" ", text))


def assert_nothing_live(text: str, *needles: str) -> None:
    """None of `needles` renders live, and no image, link, mention or HTML came from them."""
    live = live_markdown(text)
    for needle in needles:
        assert needle not in live, f"{needle!r} renders live in:\n{text}"
