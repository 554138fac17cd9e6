"""What an OpenAI-compatible server sends back, read: a reply put together from its streamed chunks (or from one
whole completion), its token counts (estimated where the server sends none), and the refusals that are about
sizes (the context window, the reply limit), read from the servers' own words into errors the client acts on."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kforge_bot.errors import ContextLengthExceeded, LLMUnavailable

STREAMING = {"stream": True, "stream_options": {"include_usage": True}}


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str = ""
    finish_reason: str | None = None
    attempts: int = 1  # HTTP requests it took, retries included
    usage_estimated: bool = False  # the server sent no usage; counts are len/4 estimates

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


@dataclass
class Streamed:
    """A streamed reply, put together chunk by chunk."""

    parts: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    usage: Any = None
    had_choice: bool = False

    def add(self, chunk: Any) -> None:
        self.model = self.model or getattr(chunk, "model", None)
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue
            self.had_choice = True
            delta = getattr(choice, "delta", None)
            if delta is not None and getattr(delta, "content", None):
                self.parts.append(delta.content)
            if delta is not None and getattr(delta, "refusal", None):
                self.refusal.append(str(delta.refusal))
            if getattr(choice, "finish_reason", None):
                self.finish_reason = choice.finish_reason

    @classmethod
    def whole(cls, completion: Any) -> Streamed:
        """A reply that came whole (a chat.completion object, or its JSON as attributes)."""
        got = cls(model=getattr(completion, "model", None), usage=getattr(completion, "usage", None))
        for choice in getattr(completion, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue
            got.had_choice = True
            message = getattr(choice, "message", None)
            if message is not None and getattr(message, "content", None):
                got.parts.append(str(message.content))
            if message is not None and getattr(message, "refusal", None):
                got.refusal.append(str(message.refusal))
            got.finish_reason = getattr(choice, "finish_reason", None) or "stop"
        return got

    def to_reply(self, messages: Sequence[Mapping[str, str]], attempts: int, model: str) -> Reply:
        text = "".join(self.parts) or "".join(self.refusal)
        usage = self.usage
        if usage is not None and getattr(usage, "prompt_tokens", None) is not None:
            prompt, done, estimated = int(usage.prompt_tokens), int(usage.completion_tokens or 0), False
        else:
            prompt = sum(_estimate_tokens(str(m.get("content", ""))) for m in messages)
            done, estimated = _estimate_tokens(text), True
        return Reply(text=text, prompt_tokens=prompt, completion_tokens=done, model=self.model or model,
                     finish_reason=self.finish_reason, attempts=attempts, usage_estimated=estimated)


class StreamBroken(Exception):
    """The transport failed while a reply streamed in: a silence longer than the timeout, or a dropped line."""

    def __init__(self, timeout: bool, message: str):
        super().__init__(message)
        self.timeout = timeout


class LimitRefused(Exception):
    """The server refused the request's max_tokens; `allowed` is what it says it takes (None: not said)."""

    def __init__(self, message: str, attempts: int, *, allowed: int | None = None, rename: bool = False,
                 completion_cap: bool = False, prompt_tokens: int | None = None, context_tokens: int | None = None):
        super().__init__(message)
        self.message, self.attempts, self.allowed, self.rename = message, attempts, allowed, rename
        self.completion_cap, self.prompt_tokens, self.context_tokens = completion_cap, prompt_tokens, context_tokens


# The servers' own words (llama.cpp's tools/server, vLLM's serving layer, OpenAI's API), read for the sizes.
_WINDOW_ASKED = re.compile(r"maximum context length is (\d+) tokens\. However, you requested \d+ tokens "
                           r"\((\d+) in the messages, (\d+) in the completion\)")
_WINDOW_INPUT = re.compile(r"maximum context length is (\d+) tokens and your request has (\d+) input tokens")
_WINDOW_MESSAGES = re.compile(r"maximum context length is (\d+) tokens\. However, your messages resulted in (\d+)")
_LLAMA_CPP_SIZES = re.compile(r"\((\d+) tokens\) (?:exceeds the available context size|is larger than the max "
                              r"context size) \((\d+) tokens\)")
_COMPLETION_CAP = re.compile(r"supports at most (\d+) completion tokens")
_RENAME = re.compile(r"max_tokens.{0,40}not supported.{0,80}max_completion_tokens", re.S)


def raise_refusal(body: Any, last: str, attempts: int) -> None:
    """Raise ContextLengthExceeded or LimitRefused when a refusal is about sizes; return otherwise."""
    inner = body.get("error", body) if isinstance(body, dict) else {}
    inner = inner if isinstance(inner, dict) else {}
    message = str(inner.get("message") or last)
    kind = str(inner.get("type") or "") + " " + str(inner.get("code") or "")
    if "exceed_context_size_error" in kind:  # llama.cpp: the prompt alone is over the window
        sizes = _LLAMA_CPP_SIZES.search(message)
        prompt = inner.get("n_prompt_tokens") or (int(sizes.group(1)) if sizes else None)
        window = inner.get("n_ctx") or (int(sizes.group(2)) if sizes else None)
        raise ContextLengthExceeded(last, prompt_tokens=_int(prompt), context_tokens=_int(window), attempts=attempts)
    if _RENAME.search(message):
        raise LimitRefused(message, attempts, rename=True)
    if m := _WINDOW_ASKED.search(message):
        window, prompt = int(m.group(1)), int(m.group(2))
        if prompt >= window:
            raise ContextLengthExceeded(last, prompt_tokens=prompt, context_tokens=window, attempts=attempts)
        raise LimitRefused(message, attempts, allowed=window - prompt, prompt_tokens=prompt, context_tokens=window)
    if m := _WINDOW_INPUT.search(message):
        window, prompt = int(m.group(1)), int(m.group(2))
        if prompt >= window:
            raise ContextLengthExceeded(last, prompt_tokens=prompt, context_tokens=window, attempts=attempts)
        raise LimitRefused(message, attempts, allowed=window - prompt, prompt_tokens=prompt, context_tokens=window)
    if m := _WINDOW_MESSAGES.search(message):
        raise ContextLengthExceeded(last, prompt_tokens=int(m.group(2)), context_tokens=int(m.group(1)),
                                    attempts=attempts)
    if "context_length_exceeded" in kind:
        raise ContextLengthExceeded(last, attempts=attempts)
    if m := _COMPLETION_CAP.search(message):
        raise LimitRefused(message, attempts, allowed=int(m.group(1)), completion_cap=True)
    if "max_tokens" in message or "max_completion_tokens" in message or inner.get("param") in ("max_tokens",
                                                                                                 "max_completion_tokens"):
        raise LimitRefused(message, attempts)


def refuses_streaming(exc: LLMUnavailable) -> bool:
    """A server's refusal of the streaming parameters themselves (HTTP 400 or 422 naming them), not of the
    request: it answers the same request without them."""
    return exc.status in (400, 422) and "stream" in str(exc).lower()


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
        if isinstance(inner, str):
            return inner[:500]
    return str(getattr(exc, "message", exc))[:500]
