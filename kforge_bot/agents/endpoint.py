"""Where an LLM is: an OpenAI-compatible endpoint (base URL, key, model, reply limit, timeout), from flags with
the environment's OPENAI_BASE_URL, OPENAI_API_KEY, KFORGE_MODEL, KFORGE_MAX_TOKENS, KFORGE_LLM_TIMEOUT and
KFORGE_LLM_ATTEMPTS behind them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from kforge_bot.errors import KforgeError

ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_API_KEY = "OPENAI_API_KEY"
ENV_MODEL = "KFORGE_MODEL"
ENV_MAX_TOKENS = "KFORGE_MAX_TOKENS"
ENV_TIMEOUT = "KFORGE_LLM_TIMEOUT"
ENV_ATTEMPTS = "KFORGE_LLM_ATTEMPTS"

DEFAULT_MAX_TOKENS = 4096  # a whole kernel file and some prose; the analyst asks for less (ANALYST_MAX_TOKENS)
MIN_MAX_TOKENS = 256  # below this a lowered max_tokens leaves no room for a kernel: the prompt must shrink
# Seconds of silence before a request counts as timed out. The first token waits for the whole prompt to be read:
# a small model on a busy CPU takes minutes for the analyst's first prompt (benchmarks/results/real_model_cpu.md).
DEFAULT_TIMEOUT_S = 300.0
# Tries per request before the endpoint counts as unavailable (and a run stops with its resume hint): the waits
# between them double from 1 s, so six tries ride out about half a minute of a server restarting.
DEFAULT_ATTEMPTS = 6


@dataclass(frozen=True)
class Endpoint:
    """Where to send prompts. `base_url=None` means OpenAI's own API."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS  # the most tokens one reply may have (sent with every request)
    timeout_s: float = DEFAULT_TIMEOUT_S  # the longest silence from the server, before the first token or between two
    stream: bool = True  # False: the server refuses streamed replies (found by LLMClient.check or a first request)
    attempts: int = DEFAULT_ATTEMPTS  # tries per request on a transient failure (429, 5xx, a dropped connection)

    @property
    def url(self) -> str:
        """Where the requests go (OpenAI's own API where no base URL is set)."""
        return self.base_url or "https://api.openai.com/v1"

    def describe(self) -> str:
        """For logs and reports; never shows the key."""
        return f"{display_model(self.model) if self.model else '(model not set)'} at {self.url}"


def display_model(model: str) -> str:
    """A model's name for people: llama.cpp names its model by the GGUF file's path, which says where the
    file lies on the serving machine; reports and PR comments show the file's name."""
    if "/" in model and model.lower().endswith(".gguf"):
        return model.rstrip("/").rsplit("/", 1)[-1]
    return model


def endpoint_from_env(
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    max_tokens: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Endpoint:
    """The endpoint from flags, falling back to the environment. Empty strings count as unset."""
    env = os.environ if env is None else env
    return Endpoint(
        base_url=(base_url or env.get(ENV_BASE_URL) or None),
        api_key=(api_key or env.get(ENV_API_KEY) or None),
        model=(model or env.get(ENV_MODEL) or None),
        max_tokens=max_tokens or int(_positive_from_env(env, ENV_MAX_TOKENS, DEFAULT_MAX_TOKENS, whole=True)),
        timeout_s=_positive_from_env(env, ENV_TIMEOUT, DEFAULT_TIMEOUT_S),
        attempts=int(_positive_from_env(env, ENV_ATTEMPTS, DEFAULT_ATTEMPTS, whole=True)),
    )


def _positive_from_env(env: Mapping[str, str], name: str, default: float, whole: bool = False) -> float:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(int(raw)) if whole else float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        kind = "whole number" if whole else "number"
        raise KforgeError(f"{name}={raw!r} is not a positive {kind}", hint=f"set it (default {default:g}) or unset it")
    return value


def configured(
    *, base_url: str | None = None, api_key: str | None = None, env: Mapping[str, str] | None = None
) -> bool:
    """Whether an endpoint is set: a base URL (local servers need no key) or an OpenAI key."""
    ep = endpoint_from_env(base_url=base_url, api_key=api_key, env=env)
    return bool(ep.base_url or ep.api_key)
