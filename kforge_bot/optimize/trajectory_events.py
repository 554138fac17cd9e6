"""The trajectory's events as types: what `RunRecord` (kforge_bot.optimize.record) folds, one class per kind that
changes the run's state. `parse` reads one line of the file (a JSON object) into its type, the one place an event
is told by its "event" string; the record dispatches on the type. Kinds the record does not fold (prompt,
prompt_trimmed) and kinds a newer version may add parse to None. kforge_bot.optimize.trajectory lists every kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

ENVELOPE = ("event", "time", "session")  # what every line carries besides its own fields


def _fields(entry: dict[str, Any], *drop: str) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ENVELOPE + drop}


@dataclass(frozen=True)
class Whole:
    """An event the record keeps whole, as written (start, session, llm_error, stop, end)."""

    KIND: ClassVar[str] = ""
    entry: dict[str, Any]

    @classmethod
    def parse(cls, e: dict[str, Any]) -> Whole:
        return cls(dict(e))


class Start(Whole):
    KIND = "start"


class Session(Whole):
    KIND = "session"


class LLMError(Whole):
    KIND = "llm_error"


class Stop(Whole):
    KIND = "stop"


class End(Whole):
    KIND = "end"


@dataclass(frozen=True)
class Baseline:
    KIND: ClassVar[str] = "baseline"
    result: dict[str, Any]
    eval_s: float = 0.0

    @classmethod
    def parse(cls, e: dict[str, Any]) -> Baseline:
        return cls(e["result"], float(e.get("eval_s", 0.0)))


@dataclass(frozen=True)
class Workload:
    KIND: ClassVar[str] = "workload"
    fields: dict[str, Any]

    @classmethod
    def parse(cls, e: dict[str, Any]) -> Workload:
        return cls(_fields(e))


@dataclass(frozen=True)
class CompiledBaselines:
    KIND: ClassVar[str] = "compiled_baselines"
    baselines: dict[str, dict[str, Any]]

    @classmethod
    def parse(cls, e: dict[str, Any]) -> CompiledBaselines:
        return cls(dict(e.get("baselines") or {}))


@dataclass(frozen=True)
class Ceilings:
    KIND: ClassVar[str] = "ceilings"
    ceilings: dict[str, Any] | None
    note: str = ""

    @classmethod
    def parse(cls, e: dict[str, Any]) -> Ceilings:
        return cls(e.get("ceilings"), str(e.get("note") or ""))


@dataclass(frozen=True)
class CountersCollected:
    """A profiler's digest for one iteration; iteration None: the run cannot collect any, and why."""

    KIND: ClassVar[str] = "counters"
    iteration: int | None
    fields: dict[str, Any]
    reason: str = ""

    @classmethod
    def parse(cls, e: dict[str, Any]) -> CountersCollected:
        n = e.get("iteration")
        return cls(None if n is None else int(n), _fields(e, "iteration"), str(e.get("reason") or ""))


@dataclass(frozen=True)
class Tunables:
    KIND: ClassVar[str] = "tunables"
    tunables: list[str]

    @classmethod
    def parse(cls, e: dict[str, Any]) -> Tunables:
        return cls(list(e.get("tunables") or []))


@dataclass(frozen=True)
class ModelReply:
    KIND: ClassVar[str] = "reply"
    iteration: int
    agent: str = "generator"
    usage: dict[str, Any] | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_s: float = 0.0

    @classmethod
    def parse(cls, e: dict[str, Any]) -> ModelReply:
        return cls(int(e.get("iteration", 0)), e.get("agent", "generator"), e.get("usage") or None,
                   str(e["model"]) if e.get("model") else None, int(e.get("prompt_tokens", 0)),
                   int(e.get("completion_tokens", 0)), float(e.get("llm_s", 0.0)))


@dataclass(frozen=True)
class CandidateWritten:
    KIND: ClassVar[str] = "candidate"
    iteration: int
    file: str | None = None
    sha256: str | None = None
    change: str = ""
    assignment: dict[str, int] | None = None
    round: int | None = None
    model: str | None = None
    parent: int | None = None

    @classmethod
    def parse(cls, e: dict[str, Any]) -> CandidateWritten:
        return cls(int(e["iteration"]), e.get("file"), e.get("sha256"), e.get("change") or "", e.get("assignment"),
                   e.get("round"), e.get("model"), e.get("parent"))


@dataclass(frozen=True)
class Malformed:
    KIND: ClassVar[str] = "malformed"
    iteration: int
    agent: str = "generator"
    feedback: str = ""
    iteration_s: float = 0.0
    history_entry: dict[str, Any] | None = None

    @classmethod
    def parse(cls, e: dict[str, Any]) -> Malformed:
        return cls(int(e["iteration"]), e.get("agent", "generator"), str(e.get("feedback", "")),
                   float(e.get("iteration_s", 0.0)), e.get("history_entry") or None)


@dataclass(frozen=True)
class Judged:
    """A candidate's evaluation and whether it became the new best."""

    KIND: ClassVar[str] = "result"
    iteration: int
    result: dict[str, Any]
    accepted: bool = False
    eval_s: float = 0.0
    iteration_s: float = 0.0
    duplicate_of: int | None = None
    loop_s: float | None = None
    round: int | None = None
    history_entry: dict[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, e: dict[str, Any]) -> Judged:
        return cls(int(e["iteration"]), e["result"], bool(e.get("accepted")), float(e.get("eval_s", 0.0)),
                   float(e.get("iteration_s", 0.0)), e.get("duplicate_of"),
                   float(e["loop_s"]) if e.get("loop_s") is not None else None,
                   int(e["round"]) if e.get("round") is not None else None, e.get("history_entry") or None)


@dataclass(frozen=True)
class Recommendations:
    KIND: ClassVar[str] = "recommendations"
    items: list[str]
    for_iteration: int = 0

    @classmethod
    def parse(cls, e: dict[str, Any]) -> Recommendations:
        return cls(list(e.get("items") or []), int(e.get("for_iteration", 0)))


TrajectoryEvent = (Whole | Baseline | Workload | CompiledBaselines | Ceilings | CountersCollected | Tunables
                   | ModelReply | CandidateWritten | Malformed | Judged | Recommendations)

_KINDS: dict[str, Any] = {cls.KIND: cls for cls in (
    Start, Session, LLMError, Stop, End, Baseline, Workload, CompiledBaselines, Ceilings, CountersCollected, Tunables,
    ModelReply, CandidateWritten, Malformed, Judged, Recommendations)}


def parse(entry: dict[str, Any]) -> TrajectoryEvent | None:
    """The typed event of one trajectory line; None for a kind the record does not fold."""
    kind = _KINDS.get(str(entry.get("event")))
    return kind.parse(entry) if kind is not None else None
