"""A thin client for any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, ...).

The endpoint comes from OPENAI_BASE_URL, OPENAI_API_KEY, KFORGE_MODEL and KFORGE_MAX_TOKENS (flags override).
Transient failures (429, 408/409, 5xx, timeouts, dropped connections) are retried with exponential backoff and
jitter, honouring Retry-After; the `openai` package's own retries are switched off so that one policy,
with an injectable `sleep`, governs every wait. A failure that retrying cannot fix raises
`LLMUnavailable`, which ends the loop with the best candidate so far. Tokens are counted across calls.

What local servers (llama.cpp, Ollama, vLLM) taught this client:
- Every request carries `max_tokens` (default 4096): without it a small model can write until its context is
  full, until the timeout, and then a retry does the same work again.
- Replies are streamed, so the timeout is the longest silence between two pieces of the reply (the first
  one included), not the whole reply's time: a slow CPU model that keeps writing is never cut off, a server
  that stopped answering is found after `timeout` seconds. A server (or proxy) that answers a streamed request
  with one JSON completion is read as that completion; one that refuses `stream`/`stream_options` (HTTP 400 or
  422 naming them) is asked once more without them, and never with them again for the client's life (the run).
- `check()`, before a run's first evaluation, asks for the model list (and, for a model the list does not name,
  one 1-token completion): a refused connection, a rejected key or a model the server does not serve is a
  KforgeError in seconds, not a failed run after the baseline's evaluation.
- A `max_tokens` the server refuses (vLLM: prompt + max_tokens over the window; OpenAI: over the model's
  completion limit) is lowered to what the server says it allows, once, and the request is sent again.
- A prompt longer than the context window raises `ContextLengthExceeded` with the sizes when the server says
  them (llama.cpp's `exceed_context_size_error`, vLLM's and OpenAI's messages): the agents then send a
  shorter prompt (kforge_bot.optimize.llm_proposer says by which rule).

`openai` is imported lazily: GPU machines that only run `check`/`gate` need not have it. Where the endpoint comes
from is kforge_bot.agents.endpoint; how a reply and a refusal are read, kforge_bot.agents.replies.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Sequence, TypeVar

from kforge_bot.agents.endpoint import (DEFAULT_MAX_TOKENS, ENV_API_KEY, ENV_BASE_URL, ENV_MAX_TOKENS, ENV_MODEL,
                                        MIN_MAX_TOKENS, Endpoint, configured, display_model, endpoint_from_env)
from kforge_bot.agents.replies import (STREAMING, LimitRefused, Reply, StreamBroken, Streamed, raise_refusal,
                                       refuses_streaming, server_message)
from kforge_bot.errors import ContextLengthExceeded, KforgeError, LLMUnavailable, MalformedReply
from kforge_bot.text import one_line

# The endpoint's names, for callers that meet the client first.
__all__ = ["DEFAULT_MAX_TOKENS", "Endpoint", "LLMClient", "Reply", "RetryPolicy", "Usage", "configured", "display_model",
           "endpoint_from_env", "parse_retry_after"]


# Local servers (vLLM, Ollama) accept any key, but the client insists on one.
_PLACEHOLDER_KEY = "unused"
_RETRYABLE_STATUS = {408, 409, 429}
CHECK_TIMEOUT_S = 20.0  # the endpoint check's longest wait: a server that takes longer to list its models is down

T = TypeVar("T")


@dataclass
class Usage:
    """Running totals over every call of one client (seed it from a trajectory on resume)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, reply: Reply) -> None:
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.retries += reply.attempts - 1
        self.estimated = self.estimated or reply.usage_estimated

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_tokens": self.total_tokens}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(**{k: data[k] for k in ("calls", "prompt_tokens", "completion_tokens", "retries", "estimated") if k in data})


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay: float = 1.0  # seconds before the first retry, doubled each time
    max_delay: float = 60.0  # cap of the exponential part
    max_retry_after: float = 300.0  # a server asking for a longer wait counts as unavailable

    def delay(self, retry: int, retry_after: float | None, rand: float) -> float:
        """Seconds to wait before retry number `retry` (1-based). `rand` is uniform in [0, 1)."""
        backoff = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        jittered = backoff * (0.5 + 0.5 * rand)  # "equal jitter": spreads clients, keeps a floor
        if retry_after is not None:
            # The server knows best: wait what it asked, plus up to 10% so clients do not stampede.
            return retry_after * (1.0 + 0.1 * rand)
        return jittered


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date); None when absent/invalid."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class LLMClient:
    """Chat with one endpoint. `sleep` and `rand` are injectable so tests never really wait."""

    endpoint: Endpoint
    timeout: float = 300.0  # seconds of silence from the server (before the first token, or between two)
    retry: RetryPolicy | None = None  # None: the default policy with the endpoint's attempts (KFORGE_LLM_ATTEMPTS)
    sleep: Callable[[float], None] = time.sleep
    rand: Callable[[], float] = random.random
    usage: Usage = field(default_factory=Usage)
    _client: Any = field(default=None, repr=False)
    _limit_key: str = field(default="max_tokens", repr=False)  # "max_completion_tokens" once a server asks for it
    _completion_cap: int | None = field(default=None, repr=False)  # the model's own limit, once a server said it
    _streams: bool = field(default=True, repr=False)  # False once a server refused `stream`: never sent again

    def __post_init__(self) -> None:
        self._streams = self.endpoint.stream

    def _openai(self) -> Any:
        if self._client is None:
            import openai  # lazy: heavy, and absent on check-only machines

            self._client = openai.OpenAI(
                base_url=self.endpoint.base_url,
                api_key=self.endpoint.api_key or _PLACEHOLDER_KEY,
                timeout=self.timeout,
                max_retries=0,  # our policy, our sleep
            )
        return self._client

    def list_models(self) -> list[str]:
        """GET /models, with the same retry policy."""
        page = self._with_retries(lambda: self._openai().models.list())[0]
        return [m.id for m in page.data]

    def resolve_model(self) -> str:
        """The configured model, or the only model the server offers (typical of llama.cpp, vLLM and Ollama;
        llama.cpp names it by its GGUF file's path, which is sent back as is)."""
        if self.endpoint.model:
            return self.endpoint.model
        models = self.list_models()
        if len(models) == 1:
            self.endpoint = replace(self.endpoint, model=models[0])
            return models[0]
        offered = ", ".join(models[:10]) or "none"
        raise KforgeError(
            f"no model chosen and the endpoint offers {len(models)} (offered: {offered})",
            hint=f"set {ENV_MODEL} or pass --model",
        )

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> Reply:
        """One completion, from `model` when given (one of several a run takes turns with), else the
        endpoint's; at most `max_tokens` (never more than the endpoint's). Raises LLMUnavailable
        (ContextLengthExceeded when the prompt does not fit) or MalformedReply (no choices). Every request, retries
        included, is counted in `usage`; the token budget is the loop's to enforce (kforge_bot.optimize.stops)."""
        model = model or self.resolve_model()
        limit = min(max_tokens, self.endpoint.max_tokens) if max_tokens else self.endpoint.max_tokens
        if self._completion_cap is not None:
            limit = min(limit, self._completion_cap)
        kwargs: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages], self._limit_key: limit}
        if self._streams:
            kwargs.update(STREAMING)
        if temperature is not None:
            kwargs["temperature"] = temperature
        attempts = 0
        while True:
            try:
                streamed, tries = self._with_retries(partial(self._stream, kwargs), model=model)
            except LimitRefused as refused:
                attempts += refused.attempts
                self._adjust_limit(kwargs, refused)
                continue
            except LLMUnavailable as exc:
                if not ("stream" in kwargs and refuses_streaming(exc)):
                    raise
                attempts += exc.attempts
                self._streams = False  # this server takes whole replies only: ask so for the rest of the run
                for key in STREAMING:
                    kwargs.pop(key)
                continue
            attempts += tries
            break
        reply = streamed.to_reply(messages, attempts, model)
        self.usage.add(reply)
        if not streamed.had_choice:
            raise MalformedReply("the endpoint returned no choices; reply with the complete answer")
        return reply

    def _adjust_limit(self, kwargs: dict[str, Any], refused: LimitRefused) -> None:
        """The request again, with the limit the server said it accepts (once per kind of refusal)."""
        if refused.rename and self._limit_key == "max_tokens":
            self._limit_key = "max_completion_tokens"  # newer OpenAI models take only this name
            kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
            return
        old = kwargs[self._limit_key]
        if refused.allowed is None or refused.allowed >= old:
            raise LLMUnavailable(f"the endpoint refused max_tokens {old}: {one_line(refused.message, 300)} (set "
                                 f"{ENV_MAX_TOKENS} or --max-tokens lower)", status=400, attempts=refused.attempts)
        if refused.allowed < MIN_MAX_TOKENS:
            raise ContextLengthExceeded(
                f"the prompt ({refused.prompt_tokens} tokens) leaves {refused.allowed} tokens of the model's "
                f"{refused.context_tokens}-token context window for the reply",
                prompt_tokens=refused.prompt_tokens, context_tokens=refused.context_tokens, attempts=refused.attempts)
        if refused.completion_cap:
            self._completion_cap = refused.allowed  # the model's own limit: every later request obeys it
        kwargs[self._limit_key] = refused.allowed

    def check(self) -> Endpoint:
        """One cheap look before a run: the server answers, takes the key and serves the model (the configured one,
        else its only one). Returns the endpoint with its model named and whether it streams; raises KforgeError
        with the fix, in seconds."""
        import openai  # lazy, as above

        where = self.endpoint.base_url or "https://api.openai.com/v1"
        quick = LLMClient(self.endpoint, timeout=min(self.timeout, CHECK_TIMEOUT_S), retry=RetryPolicy(max_attempts=1))
        try:
            offered = quick.list_models()
        except LLMUnavailable as exc:
            if exc.status in (401, 403):
                raise KforgeError(f"the LLM endpoint {where} rejected the API key (HTTP {exc.status})",
                                  hint=f"check {ENV_API_KEY} or --api-key") from None
            if exc.status is None:
                raise KforgeError(f"cannot reach the LLM endpoint {where}: {_reason(exc)}",
                                  hint=f"check {ENV_BASE_URL} or --base-url, and that the server runs") from None
            offered = []  # a proxy without GET /models: the completion below decides
        model = self.endpoint.model or (offered[0] if len(offered) == 1 else None)
        if model is None:
            raise KforgeError(f"no model chosen and the endpoint offers {len(offered)} "
                              f"(offered: {', '.join(offered[:10]) or 'none'})", hint=f"set {ENV_MODEL} or pass --model")
        if model not in offered:  # some servers answer any name (llama.cpp): the server's answer decides
            try:
                quick.chat([{"role": "user", "content": "Reply with OK."}], max_tokens=1, model=model)
            except MalformedReply:
                pass  # it answered: the endpoint, key and model work
            except (LLMUnavailable, openai.OpenAIError) as exc:
                status = getattr(exc, "status", None)
                if status in (401, 403):
                    raise KforgeError(f"the LLM endpoint {where} rejected the API key (HTTP {status})",
                                      hint=f"check {ENV_API_KEY} or --api-key") from None
                if status in (400, 404, 422):
                    raise KforgeError(f"the LLM endpoint {where} does not serve model {model!r} (HTTP {status}; "
                                      f"offered: {', '.join(offered[:10]) or 'not listed'})",
                                      hint=f"check {ENV_MODEL} or --model") from None
                raise KforgeError(f"the LLM endpoint {where} failed a 1-token request: {_reason(exc)}",
                                  hint=f"check {ENV_BASE_URL} or --base-url") from None
        self.endpoint = replace(self.endpoint, model=model, stream=quick._streams)
        self._streams = quick._streams
        return self.endpoint

    def _stream(self, kwargs: dict[str, Any]) -> Streamed:
        """Send the request and read the reply to its end: streamed, or whole where the server sent one JSON
        completion instead (inside the retry policy: a connection that drops mid-reply is retried like one that
        never answered)."""
        if "stream" not in kwargs:
            return Streamed.whole(self._openai().chat.completions.create(**kwargs))
        stream = self._openai().chat.completions.create(**kwargs)
        if "json" in stream.response.headers.get("content-type", ""):
            try:  # not server-sent events: an ordinary completion, as some proxies and small servers answer
                return Streamed.whole(json.loads(stream.response.read(), object_hook=lambda d: SimpleNamespace(**d)))
            except ValueError as exc:
                raise MalformedReply(f"the endpoint answered with JSON that does not parse ({exc})") from None
            finally:
                stream.close()
        got = Streamed()
        try:
            for chunk in stream:
                got.add(chunk)
        except Exception as exc:
            # Older openai releases let the transport's own errors out of a stream unwrapped (httpx's, by name
            # so that this module imports no transport): a dropped connection or a silence, retried as such.
            if type(exc).__module__.split(".")[0] not in ("httpx", "httpx2", "httpcore"):
                raise
            raise StreamBroken("Timeout" in type(exc).__name__, str(exc) or type(exc).__name__) from exc
        finally:
            stream.close()
        if got.had_choice and got.finish_reason is None:
            # Every server ends a reply with a finish reason; a stream closed before it is a server that went away
            # (where the connection's end is the stream's end, that is all that shows).
            raise StreamBroken(False, "the stream ended before the reply did")
        return got

    def _with_retries(self, call: Callable[[], T], model: str | None = None) -> tuple[T, int]:
        import openai  # lazy, as above

        where = self.endpoint.base_url or "https://api.openai.com/v1"
        policy = self.retry or RetryPolicy(max_attempts=self.endpoint.attempts)
        last = ""
        status: int | None = None
        for attempt in range(1, policy.max_attempts + 1):
            retry_after: float | None = None
            try:
                return call(), attempt
            except openai.APITimeoutError:
                last, status = f"timed out after {self.timeout:g} s without a word from the server", None
            except openai.APIConnectionError as exc:
                last, status = f"connection failed ({exc.__cause__ or exc})", None
            except StreamBroken as exc:
                last = (f"timed out after {self.timeout:g} s without a word from the server" if exc.timeout
                        else f"the connection dropped mid-reply ({exc})")
                status = None
            except openai.APIStatusError as exc:
                status = exc.status_code
                last = f"HTTP {status}: {server_message(exc)}"
                if status not in _RETRYABLE_STATUS and status < 500:
                    raise_refusal(exc.body, last, attempt)
                    raise LLMUnavailable(
                        f"LLM endpoint {where} refused the request: {last}{self._status_hint(status, model)}",
                        status=status,
                        attempts=attempt,
                    ) from exc
                retry_after = parse_retry_after(dict(exc.response.headers))
            except openai.APIError as exc:  # an error event in the middle of a stream
                last = f"the server reported an error mid-reply: {server_message(exc)}"
                raise_refusal(exc.body, last, attempt)
            except openai.OpenAIError as exc:  # unparseable response and the like: retrying will not help
                raise LLMUnavailable(f"LLM endpoint {where} failed: {exc}", attempts=attempt) from exc
            if retry_after is not None and retry_after > policy.max_retry_after:
                raise LLMUnavailable(
                    f"LLM endpoint {where} asked to wait {retry_after:.0f} s ({last}); giving up",
                    status=status,
                    attempts=attempt,
                )
            if attempt < policy.max_attempts:
                self.sleep(policy.delay(attempt, retry_after, self.rand()))
        raise LLMUnavailable(
            f"LLM endpoint {where} failed after {policy.max_attempts} attempts: {last}",
            status=status,
            attempts=policy.max_attempts,
        )

    def _status_hint(self, status: int, model: str | None) -> str:
        if status in (401, 403):
            return f" (check {ENV_API_KEY})"
        if status == 404:
            offered = ""
            try:  # a model name the server spells differently (Ollama's "gemma3:270m", llama.cpp's file path)
                models = self.list_models()
                if model is not None and model not in models:
                    offered = f"; the endpoint offers: {', '.join(models[:10]) or 'none'}"
            except (LLMUnavailable, KforgeError):
                pass
            return f" (check {ENV_BASE_URL} and the model name, {ENV_MODEL} or --model{offered})"
        return ""


def _reason(exc: BaseException) -> str:
    """The cause in a few words: 'connection failed (...)' reads better without the endpoint said twice."""
    text = str(exc)
    return one_line(text.split(": ", 1)[1] if text.startswith("LLM endpoint ") and ": " in text else text, 200)


