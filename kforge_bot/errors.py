"""The one error type users see, and the signals that end or steer an optimization run.

Anything a user can fix (a malformed kernel file, manifest, policy, event payload or a bad flag)
raises `KforgeError` with a single line that names the file and the fix. The CLI prints it and
exits with status 2; it never prints a traceback for it.

The loop-control signals (`LoopControl` and below) are not user-facing failures but how the agents, the
proposers and the stop rules tell the loop what to do next, as in mini-swe-agent:
- `NonTerminating` (e.g. `MalformedReply`): this iteration is lost; feed `feedback` back and go on.
- `Terminating` (e.g. `LLMUnavailable`, `BudgetExhausted`, `NoProgress`): stop the loop and report the best so far.
They live here, in a leaf that imports nothing of the harness, so that every part that raises or catches one
(agents, tuner, loop, commands) reaches them without importing another part.
"""

from __future__ import annotations

from pathlib import Path


class KforgeError(Exception):
    """A user-facing failure: one line, naming the file and what to do."""

    def __init__(self, message: str, *, path: str | Path | None = None, hint: str | None = None):
        self.path = str(path) if path is not None else None
        self.hint = hint
        text = f"{self.path}: {message}" if self.path else message
        if hint:
            text = f"{text} ({hint})"
        super().__init__(text.replace("\n", " "))


class LoopControl(Exception):
    """Base class of every signal the agents raise to steer the loop."""


class NonTerminating(LoopControl):
    """The iteration fails; the run goes on."""


class Terminating(LoopControl):
    """The run stops here; the best candidate so far stands."""


class MalformedReply(NonTerminating):
    """A model's reply could not be used. `feedback` is what to tell the model next time."""

    def __init__(self, feedback: str):
        self.feedback = feedback
        super().__init__(feedback)


class LLMUnavailable(Terminating):
    """The endpoint failed for good: a non-retryable error, or retries exhausted."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 0):
        self.status = status
        self.attempts = attempts
        super().__init__(message)


class ContextLengthExceeded(LLMUnavailable):
    """The prompt does not fit the model's context window (sizes in tokens when the server said them). The
    agents answer it with a shorter prompt; only when the shortest does not fit either does it end the run."""

    def __init__(self, message: str, *, prompt_tokens: int | None = None, context_tokens: int | None = None,
                 attempts: int = 0):
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens
        super().__init__(message, status=400, attempts=attempts)


class BudgetExhausted(Terminating):
    """A budget (tokens, iterations, wall time) is spent. `budget` names which one."""

    def __init__(self, message: str, *, budget: str = ""):
        self.budget = budget
        super().__init__(message)


class NoProgress(Terminating):
    """K rounds in a row brought no better candidate."""


class NearRoofline(Terminating):
    """The kernel already sits within the set fraction of its roofline: little is left to gain."""


class SearchExhausted(Terminating):
    """The tuner has nothing left to try (or nothing to tune at all)."""
