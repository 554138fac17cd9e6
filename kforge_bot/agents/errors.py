"""Loop-control exceptions: how the agents tell the loop what to do next.

As in mini-swe-agent, these are signals for the loop, not user-facing failures:
- `NonTerminating` (e.g. `MalformedReply`): this iteration is lost; feed `feedback` back and go on.
- `Terminating` (e.g. `LLMUnavailable`, `BudgetExhausted`): stop the loop and report the best so far.
A user-fixable mistake (a bad flag, a bad marker in a kernel file) is a `kforge_bot.errors.KforgeError`
instead, and the CLI prints it.
"""

from __future__ import annotations


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
