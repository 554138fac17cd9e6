"""A thin client for any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, ...).

The endpoint comes from OPENAI_BASE_URL, OPENAI_API_KEY and KFORGE_MODEL (flags override). Transient
failures (429, 408/409, 5xx, timeouts, dropped connections) are retried with exponential backoff and
jitter, honouring Retry-After; the `openai` package's own retries are switched off so that one policy,
with an injectable `sleep`, governs every wait. A failure that retrying cannot fix raises
`LLMUnavailable`, which ends the loop with the best candidate so far. Tokens are counted across calls.

`openai` is imported lazily: GPU machines that only run `check`/`gate` need not have it.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence

from kforge_bot.agents.errors import BudgetExhausted, LLMUnavailable, MalformedReply
from kforge_bot.errors import KforgeError

ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_API_KEY = "OPENAI_API_KEY"
ENV_MODEL = "KFORGE_MODEL"

# Local servers (vLLM, Ollama) accept any key, but the client insists on one.
_PLACEHOLDER_KEY = "unused"
_RETRYABLE_STATUS = {408, 409, 429}


@dataclass(frozen=True)
class Endpoint:
    """Where to send prompts. `base_url=None` means OpenAI's own API."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None

    def describe(self) -> str:
        """For logs and reports; never shows the key."""
        where = self.base_url or "https://api.openai.com/v1"
        return f"{self.model or '(model not set)'} at {where}"


def endpoint_from_env(
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Endpoint:
    """The endpoint from flags, falling back to the environment. Empty strings count as unset."""
    env = os.environ if env is None else env
    return Endpoint(
        base_url=(base_url or env.get(ENV_BASE_URL) or None),
        api_key=(api_key or env.get(ENV_API_KEY) or None),
        model=(model or env.get(ENV_MODEL) or None),
    )


def configured(
    *, base_url: str | None = None, api_key: str | None = None, env: Mapping[str, str] | None = None
) -> bool:
    """Whether an endpoint is set: a base URL (local servers need no key) or an OpenAI key."""
    ep = endpoint_from_env(base_url=base_url, api_key=api_key, env=env)
    return bool(ep.base_url or ep.api_key)


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


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


@dataclass
class LLMClient:
    """Chat with one endpoint. `sleep` and `rand` are injectable so tests never really wait."""

    endpoint: Endpoint
    timeout: float = 300.0  # seconds per HTTP request
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    token_budget: int | None = None  # refuse new calls once this many tokens are spent
    sleep: Callable[[float], None] = time.sleep
    rand: Callable[[], float] = random.random
    usage: Usage = field(default_factory=Usage)
    _client: Any = field(default=None, repr=False)

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
        """The configured model, or the only model the server offers (typical of vLLM and Ollama)."""
        if self.endpoint.model:
            return self.endpoint.model
        models = self.list_models()
        if len(models) == 1:
            self.endpoint = Endpoint(self.endpoint.base_url, self.endpoint.api_key, models[0])
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
        endpoint's. Raises BudgetExhausted, LLMUnavailable or MalformedReply (no choices)."""
        if self.token_budget is not None and self.usage.total_tokens >= self.token_budget:
            raise BudgetExhausted(
                f"token budget spent: {self.usage.total_tokens} of {self.token_budget}", budget="tokens"
            )
        model = model or self.resolve_model()
        kwargs: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages]}
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        completion, attempts = self._with_retries(lambda: self._openai().chat.completions.create(**kwargs))
        reply = self._to_reply(completion, messages, attempts, model)
        self.usage.add(reply)
        if not completion.choices:
            raise MalformedReply("the endpoint returned no choices; reply with the complete answer")
        return reply

    @staticmethod
    def _to_reply(completion: Any, messages: Sequence[Mapping[str, str]], attempts: int, model: str) -> Reply:
        choice = completion.choices[0] if completion.choices else None
        message = choice.message if choice is not None else None
        text = (message.content if message is not None else None) or ""
        refusal = getattr(message, "refusal", None) if message is not None else None
        if not text and refusal:
            text = str(refusal)
        usage = getattr(completion, "usage", None)
        if usage is not None and usage.prompt_tokens is not None:
            prompt, done, estimated = int(usage.prompt_tokens), int(usage.completion_tokens or 0), False
        else:
            prompt = sum(_estimate_tokens(str(m.get("content", ""))) for m in messages)
            done, estimated = _estimate_tokens(text), True
        return Reply(
            text=text,
            prompt_tokens=prompt,
            completion_tokens=done,
            model=getattr(completion, "model", None) or model,
            finish_reason=getattr(choice, "finish_reason", None),
            attempts=attempts,
            usage_estimated=estimated,
        )

    def _with_retries(self, call: Callable[[], Any]) -> tuple[Any, int]:
        import openai  # lazy, as above

        where = self.endpoint.base_url or "https://api.openai.com/v1"
        last = ""
        status: int | None = None
        for attempt in range(1, self.retry.max_attempts + 1):
            retry_after: float | None = None
            try:
                return call(), attempt
            except openai.APITimeoutError:
                last, status = f"timed out after {self.timeout:g} s", None
            except openai.APIConnectionError as exc:
                last, status = f"connection failed ({exc.__cause__ or exc})", None
            except openai.APIStatusError as exc:
                status = exc.status_code
                last = f"HTTP {status}: {_server_message(exc)}"
                if status not in _RETRYABLE_STATUS and status < 500:
                    raise LLMUnavailable(
                        f"LLM endpoint {where} refused the request: {last}{_status_hint(status)}",
                        status=status,
                        attempts=attempt,
                    ) from exc
                retry_after = parse_retry_after(dict(exc.response.headers))
            except openai.OpenAIError as exc:  # unparseable response and the like: retrying will not help
                raise LLMUnavailable(f"LLM endpoint {where} failed: {exc}", attempts=attempt) from exc
            if retry_after is not None and retry_after > self.retry.max_retry_after:
                raise LLMUnavailable(
                    f"LLM endpoint {where} asked to wait {retry_after:.0f} s ({last}); giving up",
                    status=status,
                    attempts=attempt,
                )
            if attempt < self.retry.max_attempts:
                self.sleep(self.retry.delay(attempt, retry_after, self.rand()))
        raise LLMUnavailable(
            f"LLM endpoint {where} failed after {self.retry.max_attempts} attempts: {last}",
            status=status,
            attempts=self.retry.max_attempts,
        )


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
        if isinstance(inner, str):
            return inner[:500]
    return str(getattr(exc, "message", exc))[:500]


def _status_hint(status: int) -> str:
    if status in (401, 403):
        return f" (check {ENV_API_KEY})"
    if status == 404:
        return f" (check {ENV_BASE_URL} and the model name, {ENV_MODEL} or --model)"
    return ""
