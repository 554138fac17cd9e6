"""What the loop asks of a proposer: the next candidate (`Proposal`), and the two proposers' names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kforge_bot.optimize.record import IterationRecord

if TYPE_CHECKING:  # the loop imports this module
    from kforge_bot.optimize.loop import Loop

TUNER = "tuner"
LLM = "llm"


@dataclass
class Proposal:
    source: str
    change: str = ""
    assignment: dict[str, int] | None = None
    parent: int | None = None  # the iteration it started from (0: the kernel as written)
    model: str | None = None


class Proposer(Protocol):
    mode: str

    def bind(self, loop: Loop) -> None: ...

    def prepare(self) -> None: ...

    def start(self) -> None: ...

    def propose(self, iteration: int) -> Proposal: ...

    def observe(self, it: IterationRecord) -> None: ...

    def describe(self) -> dict[str, Any]: ...

