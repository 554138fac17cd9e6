"""The LLM client, with the real `openai` package talking HTTP to a scripted server on 127.0.0.1."""

from __future__ import annotations

import email.utils
import time

import pytest
from fakes.llm_server import Die, HTTPError, ScriptedLLMServer, rate_limited, reply, server_error, stall

from kforge_bot.agents.llm import (
    DEFAULT_MAX_TOKENS,
    Endpoint,
    LLMClient,
    RetryPolicy,
    Usage,
    configured,
    display_model,
    endpoint_from_env,
    parse_retry_after,
)
from kforge_bot.errors import ContextLengthExceeded, KforgeError, LLMUnavailable, MalformedReply

MESSAGES = [
    {"role": "system", "content": "You write Triton kernels."},
    {"role": "user", "content": "Make softmax faster on the H200."},
]


@pytest.fixture
def server():
    with ScriptedLLMServer(api_key="sk-test-123") as s:
        yield s


def make_client(server: ScriptedLLMServer, **kwargs) -> tuple[LLMClient, list[float]]:
    sleeps: list[float] = []
    kwargs.setdefault("retry", RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=8.0))
    client = LLMClient(
        Endpoint(server.base_url, "sk-test-123", "kforge-test-model"),
        timeout=kwargs.pop("timeout", 5.0),
        sleep=sleeps.append,
        rand=lambda: 0.5,
        **kwargs,
    )
    return client, sleeps


# --- endpoint configuration -------------------------------------------------------------------------


def test_endpoint_from_env_and_flag_override():
    env = {"OPENAI_BASE_URL": "http://localhost:8000/v1", "OPENAI_API_KEY": "k", "KFORGE_MODEL": "qwen"}
    assert endpoint_from_env(env=env) == Endpoint("http://localhost:8000/v1", "k", "qwen")
    ep = endpoint_from_env(base_url="http://other/v1", model="llama", env=env)
    assert ep == Endpoint("http://other/v1", "k", "llama")
    assert "k" not in ep.describe().split() and "llama at http://other/v1" == ep.describe()


def test_configured_needs_a_base_url_or_a_key():
    assert not configured(env={})
    assert not configured(env={"OPENAI_BASE_URL": "", "KFORGE_MODEL": "x"})  # a model alone is no endpoint
    assert configured(env={"OPENAI_BASE_URL": "http://localhost:11434/v1"})  # Ollama: no key needed
    assert configured(env={"OPENAI_API_KEY": "sk-x"})  # OpenAI itself
    assert configured(base_url="http://127.0.0.1:1/v1", env={})


# --- a plain call: wire format, headers, tokens -------------------------------------------------------


def test_chat_sends_the_messages_and_counts_tokens(server):
    server.push(reply("Here is the kernel.", prompt_tokens=812, completion_tokens=301))
    client, sleeps = make_client(server)
    out = client.chat(MESSAGES, temperature=0.2, max_tokens=4096)
    assert out.text == "Here is the kernel."
    assert (out.prompt_tokens, out.completion_tokens, out.total_tokens) == (812, 301, 1113)
    assert out.finish_reason == "stop" and out.attempts == 1 and not out.usage_estimated
    assert sleeps == []
    (body,) = server.chat_requests
    assert body["model"] == "kforge-test-model"
    assert body["messages"] == MESSAGES
    assert body["temperature"] == 0.2 and body["max_tokens"] == 4096
    post = [r for r in server.requests if r.method == "POST"][0]
    assert {k.lower(): v for k, v in post.headers.items()}["authorization"] == "Bearer sk-test-123"


def test_usage_accumulates_across_calls(server):
    server.push(reply("one", prompt_tokens=100, completion_tokens=10), reply("two", prompt_tokens=200, completion_tokens=20))
    client, _ = make_client(server)
    client.chat(MESSAGES)
    client.chat(MESSAGES)
    assert client.usage == Usage(calls=2, prompt_tokens=300, completion_tokens=30, retries=0, estimated=False)
    assert client.usage.to_dict()["total_tokens"] == 330
    assert Usage.from_dict(client.usage.to_dict()) == client.usage  # resumable from a trajectory


def test_missing_usage_is_estimated_and_flagged(server):
    server.push(reply("x" * 400, omit_usage=True))
    client, _ = make_client(server)
    out = client.chat(MESSAGES)
    assert out.usage_estimated and client.usage.estimated
    assert out.completion_tokens == 100  # 400 characters / 4
    assert out.prompt_tokens > 0


def test_the_client_counts_every_call_and_leaves_the_token_budget_to_the_loop(server):
    server.push(reply("a", prompt_tokens=900, completion_tokens=200), reply("b", prompt_tokens=10, completion_tokens=5))
    client, _ = make_client(server)
    client.chat(MESSAGES)
    client.chat(MESSAGES)  # past 1,000 tokens it still asks: the loop decides when to stop (optimize.stops)
    assert client.usage.to_dict()["total_tokens"] == 1115 and len(server.chat_requests) == 2
    assert not hasattr(client, "token_budget")  # one owner of the budget, not two


def test_truncated_reply_is_reported(server):
    server.push(reply("```python\ndef f(", finish_reason="length"))
    client, _ = make_client(server)
    out = client.chat(MESSAGES)
    assert out.truncated and out.finish_reason == "length"


# --- retries ------------------------------------------------------------------------------------------


def test_429_then_success_honours_retry_after(server):
    server.push(rate_limited(retry_after=2.5), reply("ok after the limit"))
    client, sleeps = make_client(server)
    out = client.chat(MESSAGES)
    assert out.text == "ok after the limit" and out.attempts == 2
    assert len(sleeps) == 1 and 2.5 <= sleeps[0] <= 2.5 * 1.1  # at least what the server asked
    assert len(server.chat_requests) == 2
    assert server.chat_requests[0] == server.chat_requests[1]  # the same request, resent
    assert client.usage.retries == 1


def test_retry_after_ms_header(server):
    server.push(rate_limited(retry_after=0.25, header="retry-after-ms"), reply("ok"))
    client, sleeps = make_client(server)
    client.chat(MESSAGES)
    assert 0.25 <= sleeps[0] <= 0.25 * 1.1


def test_retries_really_wait_when_sleep_is_real(server):
    """The default sleep is time.sleep: a 30 ms Retry-After costs about 30 ms of wall time."""
    server.push(rate_limited(retry_after=0.03), reply("ok"))
    client = LLMClient(Endpoint(server.base_url, "sk-test-123", "kforge-test-model"), timeout=5.0)
    t0 = time.monotonic()
    assert client.chat(MESSAGES).text == "ok"
    assert time.monotonic() - t0 >= 0.03


def test_500_exhausted_raises_llm_unavailable_after_exponential_backoff(server):
    server.push(*[server_error(500)] * 4)
    client, sleeps = make_client(server)
    with pytest.raises(LLMUnavailable) as info:
        client.chat(MESSAGES)
    err = info.value
    assert err.status == 500 and err.attempts == 4
    assert "failed after 4 attempts" in str(err) and "HTTP 500" in str(err)
    assert "The server had an error" in str(err)  # the server's own message comes through
    assert "sk-test-123" not in str(err)
    assert len(server.chat_requests) == 4
    assert sleeps == [0.375, 0.75, 1.5]  # 0.5 * 2^k with "equal jitter" at rand = 0.5


def test_the_endpoint_says_how_many_tries_a_request_gets(server):
    """KFORGE_LLM_ATTEMPTS (through the endpoint) bounds the tries where no retry policy is given."""
    server.push(*[server_error(500)] * 3)
    sleeps: list[float] = []
    client = LLMClient(Endpoint(server.base_url, "sk-test-123", "kforge-test-model", attempts=2), timeout=5.0,
                       sleep=sleeps.append, rand=lambda: 0.5)
    with pytest.raises(LLMUnavailable, match="failed after 2 attempts"):
        client.chat(MESSAGES)
    assert len(server.chat_requests) == 2 and sleeps == [0.75]  # the default policy's first wait: 1 s, jittered


def test_backoff_is_capped_and_jittered():
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    assert [policy.delay(k, None, 0.0) for k in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert [policy.delay(k, None, 0.999999) for k in (1, 4, 6)] == pytest.approx([1.0, 8.0, 8.0])
    assert policy.delay(1, 3.0, 0.0) == 3.0 and policy.delay(1, 3.0, 1.0) == pytest.approx(3.3)


def test_5xx_variants_and_recovery(server):
    server.push(server_error(502, "Bad gateway"), server_error(503, "Overloaded"), reply("finally"))
    client, sleeps = make_client(server)
    assert client.chat(MESSAGES).text == "finally"
    assert len(sleeps) == 2


def test_timeout_then_success(server):
    server.push(stall(3.0), reply("in time"))
    client, sleeps = make_client(server, timeout=0.3)
    t0 = time.monotonic()
    out = client.chat(MESSAGES)
    assert out.text == "in time" and out.attempts == 2
    assert time.monotonic() - t0 < 2.5  # the client gave up on the stalled request
    assert len(sleeps) == 1


def test_timeouts_exhausted(server):
    server.push(stall(3.0), stall(3.0))
    client, _ = make_client(server, timeout=0.2, retry=RetryPolicy(max_attempts=2, base_delay=0.01))
    with pytest.raises(LLMUnavailable, match="timed out after 0.2 s"):
        client.chat(MESSAGES)


def test_non_retryable_error_fails_at_once(server):
    server.push(HTTPError(400, "This model's maximum context length is 8192 tokens.", error_type="invalid_request_error"))
    client, sleeps = make_client(server)
    with pytest.raises(LLMUnavailable, match="maximum context length") as info:
        client.chat(MESSAGES)
    assert info.value.status == 400 and info.value.attempts == 1
    assert sleeps == [] and len(server.chat_requests) == 1


def test_wrong_key_is_unavailable_with_a_hint(server):
    client = LLMClient(Endpoint(server.base_url, "sk-wrong", "kforge-test-model"), sleep=lambda s: None)
    with pytest.raises(LLMUnavailable) as info:
        client.chat(MESSAGES)
    assert info.value.status == 401 and "OPENAI_API_KEY" in str(info.value)
    assert "sk-wrong" not in str(info.value)


def test_retry_after_beyond_the_limit_gives_up_without_waiting(server):
    server.push(rate_limited(retry_after=3600))
    client, sleeps = make_client(server)
    with pytest.raises(LLMUnavailable, match="asked to wait 3600 s"):
        client.chat(MESSAGES)
    assert sleeps == []


def test_connection_refused_is_retried_then_unavailable():
    with ScriptedLLMServer() as s:
        url = s.base_url
    # the server is gone: nothing listens on that port any more
    sleeps: list[float] = []
    client = LLMClient(Endpoint(url, None, "m"), timeout=2.0, retry=RetryPolicy(max_attempts=3, base_delay=0.01), sleep=sleeps.append)
    with pytest.raises(LLMUnavailable, match="failed after 3 attempts: connection failed"):
        client.chat(MESSAGES)
    assert len(sleeps) == 2


def test_parse_retry_after_forms():
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28.0 <= parse_retry_after({"retry-after": date}, now=now) <= 31.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


# --- model selection ----------------------------------------------------------------------------------


def test_model_from_the_server_when_it_offers_one(server):
    server.push(reply("hi"))
    client = LLMClient(Endpoint(server.base_url, "sk-test-123", None), sleep=lambda s: None)
    client.chat(MESSAGES)
    assert server.chat_requests[0]["model"] == "kforge-test-model"
    assert [r.path for r in server.requests if r.method == "GET"] == ["/v1/models"]


def test_several_models_and_none_chosen_is_a_user_error():
    with ScriptedLLMServer(models=["qwen2.5-coder-32b", "llama-3.3-70b"]) as s:
        client = LLMClient(Endpoint(s.base_url, None, None), sleep=lambda s: None)
        with pytest.raises(KforgeError, match="KFORGE_MODEL") as info:
            client.chat(MESSAGES)
        assert "qwen2.5-coder-32b" in str(info.value)
        assert s.chat_requests == []


def test_no_choices_is_a_malformed_reply():
    """A server returning an empty choices list (seen from some proxies) costs an iteration, not the run."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            return

        def do_POST(self):
            assert json.loads(self.rfile.read(int(self.headers["Content-Length"])))["stream"] is True
            chunk = json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}})
            body = f"data: {chunk}\n\ndata: [DONE]\n\n".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    try:
        client = LLMClient(Endpoint(f"http://127.0.0.1:{httpd.server_address[1]}/v1", None, "m"), sleep=lambda s: None)
        with pytest.raises(MalformedReply, match="no choices"):
            client.chat(MESSAGES)
        assert client.usage.calls == 1 and client.usage.prompt_tokens == 5  # still paid for
    finally:
        httpd.shutdown()
        httpd.server_close()


# --- what a real local server (llama.cpp, vLLM, Ollama) does to the client -----------------------------


def test_every_request_carries_max_tokens_and_the_setting_changes_it(server):
    """llama.cpp with no max_tokens writes until its context is full: 13,900 tokens in 300 s on a CPU."""
    server.push(reply("a"), reply("b"), reply("c"))
    client, _ = make_client(server)
    client.chat(MESSAGES)
    client.chat(MESSAGES, max_tokens=100_000)  # an agent may ask for less, never for more than the setting
    client.chat(MESSAGES, max_tokens=1024)
    assert [b["max_tokens"] for b in server.chat_requests] == [DEFAULT_MAX_TOKENS, DEFAULT_MAX_TOKENS, 1024]
    assert DEFAULT_MAX_TOKENS == 4096
    assert endpoint_from_env(env={"KFORGE_MAX_TOKENS": "512"}).max_tokens == 512
    assert endpoint_from_env(max_tokens=300, env={"KFORGE_MAX_TOKENS": "512"}).max_tokens == 300
    with pytest.raises(KforgeError, match="KFORGE_MAX_TOKENS='lots' is not a positive whole number"):
        endpoint_from_env(env={"KFORGE_MAX_TOKENS": "lots"})


def test_the_silence_timeout_is_a_setting_for_slow_prompt_reading():
    """llama.cpp on 2 busy cores read a prompt at 27 tokens/s: an 8,000-token prompt's first token takes 5 minutes."""
    assert endpoint_from_env(env={}).timeout_s == 300.0
    assert endpoint_from_env(env={"KFORGE_LLM_TIMEOUT": "900"}).timeout_s == 900.0
    with pytest.raises(KforgeError, match="KFORGE_LLM_TIMEOUT='-1' is not a positive number"):
        endpoint_from_env(env={"KFORGE_LLM_TIMEOUT": "-1"})
    assert endpoint_from_env(env={}).attempts == 6
    assert endpoint_from_env(env={"KFORGE_LLM_ATTEMPTS": "2"}).attempts == 2
    with pytest.raises(KforgeError, match="KFORGE_LLM_ATTEMPTS='0.5' is not a positive whole number"):
        endpoint_from_env(env={"KFORGE_LLM_ATTEMPTS": "0.5"})


def test_a_slow_model_that_keeps_writing_is_not_cut_off_by_the_timeout(server):
    """A CPU model writes for minutes: the timeout is the longest silence, not the whole reply's time."""
    text = "```python\n" + "x = 1\n" * 12 + "```"
    server.push(reply(text, piece_chars=8, piece_delay=0.12))  # ~1.2 s in all, never 0.6 s silent
    client, sleeps = make_client(server, timeout=0.6)
    out = client.chat(MESSAGES)
    assert out.text == text and out.attempts == 1 and sleeps == []
    (body,) = server.chat_requests
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_a_stream_that_falls_silent_times_out_and_is_retried(server):
    server.push(reply("first part, then nothing", piece_chars=5, piece_delay=30.0), reply("whole"))
    client, sleeps = make_client(server, timeout=0.4)
    t0 = time.monotonic()
    out = client.chat(MESSAGES)
    assert out.text == "whole" and out.attempts == 2 and len(sleeps) == 1
    assert time.monotonic() - t0 < 20  # the client gave up on the silence (30 s) long before it ended


def test_a_slow_first_token_within_the_timeout_is_waited_for(server):
    server.push(reply("late but fine", delay=0.5))
    client, sleeps = make_client(server, timeout=1.5)
    assert client.chat(MESSAGES).text == "late but fine" and sleeps == []


def test_llama_cpp_context_refusal_is_context_length_exceeded_with_the_sizes():
    long = [{"role": "user", "content": "profile row\n" * 400}]
    with ScriptedLLMServer(n_ctx=1000) as s:
        client = LLMClient(Endpoint(s.base_url, None, "m"), sleep=lambda _: None)
        with pytest.raises(ContextLengthExceeded) as info:
            client.chat(long)
        assert len(s.chat_requests) == 1  # not retried: the same prompt cannot fit later
    assert info.value.context_tokens == 1000 and info.value.prompt_tokens == 1204
    assert info.value.status == 400 and "exceeds the available context size (1000 tokens)" in str(info.value)
    assert isinstance(info.value, LLMUnavailable)  # whoever does not trim stops as before


def test_vllm_window_refusal_lowers_max_tokens_to_what_is_left():
    with ScriptedLLMServer([reply("fits")], max_model_len=3000) as s:
        client = LLMClient(Endpoint(s.base_url, None, "m"), sleep=lambda _: None)
        out = client.chat(MESSAGES)
        first, second = s.chat_requests
    prompt = sum(len(m["content"]) // 4 + 4 for m in MESSAGES)
    assert first["max_tokens"] == 4096 and second["max_tokens"] == 3000 - prompt
    assert out.text == "fits" and out.attempts == 2


def test_a_window_too_small_for_a_reply_is_a_context_error():
    with ScriptedLLMServer([], max_model_len=60) as s:
        client = LLMClient(Endpoint(s.base_url, None, "m"), sleep=lambda _: None)
        with pytest.raises(ContextLengthExceeded, match="leaves 3[0-9] tokens of the model's 60-token context window"):
            client.chat(MESSAGES)


def test_a_completion_cap_the_server_names_is_obeyed_from_then_on(server):
    cap = HTTPError(400, "max_tokens is too large: 4096. This model supports at most 1024 completion tokens, whereas "
                         "you provided 4096.", error_type="invalid_request_error", code="invalid_value")
    server.push(cap, reply("one"), reply("two"))
    client, _ = make_client(server)
    assert client.chat(MESSAGES).text == "one" and client.chat(MESSAGES).text == "two"
    assert [b["max_tokens"] for b in server.chat_requests] == [4096, 1024, 1024]


def test_a_model_that_takes_only_max_completion_tokens_gets_it(server):
    server.push(HTTPError(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                               "'max_completion_tokens' instead.", error_type="invalid_request_error",
                          code="unsupported_parameter"), reply("ok"))
    client, _ = make_client(server)
    assert client.chat(MESSAGES).text == "ok"
    first, second = server.chat_requests
    assert first["max_tokens"] == 4096 and "max_tokens" not in second and second["max_completion_tokens"] == 4096


def test_a_max_tokens_refused_without_a_number_names_the_setting(server):
    server.push(HTTPError(400, "max_tokens must be at most the model's limit", error_type="invalid_request_error"))
    client, _ = make_client(server)
    with pytest.raises(LLMUnavailable, match=r"refused max_tokens 4096: .*\(set KFORGE_MAX_TOKENS or --max-tokens lower\)"):
        client.chat(MESSAGES)


def test_a_model_name_the_server_spells_otherwise_lists_what_it_offers():
    """llama.cpp names its model by the GGUF's path; vLLM and Ollama refuse any other name with a 404."""
    path = "/home/me/models/gemma-3-270m-q4_k_m.gguf"
    with ScriptedLLMServer(models=[path], strict_models=True) as s:
        client = LLMClient(Endpoint(s.base_url, None, "gemma3"), sleep=lambda _: None)
        with pytest.raises(LLMUnavailable) as info:
            client.chat(MESSAGES)
    assert "HTTP 404" in str(info.value) and f"the endpoint offers: {path}" in str(info.value)
    assert Endpoint(s.base_url, None, path).describe().startswith("gemma-3-270m-q4_k_m.gguf at ")  # no path in reports
    assert display_model("gemma3:270m") == "gemma3:270m"


def test_a_server_that_dies_mid_reply_is_retried_then_unavailable():
    with ScriptedLLMServer([Die(after_chars=20)]) as s:
        sleeps: list[float] = []
        client = LLMClient(Endpoint(s.base_url, None, "m"), sleep=sleeps.append,
                           retry=RetryPolicy(max_attempts=3, base_delay=0.01))
        with pytest.raises(LLMUnavailable, match="failed after 3 attempts: connection failed") as info:
            client.chat(MESSAGES)
    assert info.value.attempts == 3 and len(sleeps) == 2 and s.died


# --- endpoints as they are: reply shapes, a server without streaming, the check before a run -----------------


@pytest.mark.parametrize("dialect", ["llama.cpp", "vllm", "ollama", "json-proxy"])
def test_each_server_s_reply_shape_reads_as_one_completion_with_its_usage(dialect: str) -> None:
    with ScriptedLLMServer([reply("```python\nx = 1\n```", prompt_tokens=120, completion_tokens=9)],
                           dialect=dialect) as server:
        client = LLMClient(Endpoint(server.base_url, None, "kforge-test-model"), timeout=5.0)
        got = client.chat(MESSAGES)
        [body] = server.chat_requests
    assert got.text == "```python\nx = 1\n```" and got.finish_reason == "stop"
    assert (got.prompt_tokens, got.completion_tokens, got.usage_estimated) == (120, 9, False)
    assert body["stream"] is True  # every one of them was asked for a stream; the proxy answered whole


def test_a_server_that_refuses_streaming_is_asked_again_without_it_and_never_with_it_again() -> None:
    with ScriptedLLMServer([reply("first", prompt_tokens=10, completion_tokens=1),
                            reply("second", prompt_tokens=10, completion_tokens=1)], dialect="no-stream") as server:
        client = LLMClient(Endpoint(server.base_url, None, "kforge-test-model"), timeout=5.0)
        assert client.chat(MESSAGES).text == "first"
        assert client.chat(MESSAGES).text == "second"
        bodies = server.chat_requests
    assert [("stream" in b, "stream_options" in b) for b in bodies] == [(True, True), (False, False), (False, False)]
    assert client.usage.calls == 2 and client.usage.total_tokens == 22


def test_the_check_passes_a_working_endpoint_and_names_its_only_model() -> None:
    with ScriptedLLMServer([], dialect="vllm") as server:
        checked = LLMClient(Endpoint(server.base_url, None, None), timeout=5.0).check()
        assert [r.method for r in server.requests] == ["GET"]  # listed: no completion spent
    assert checked.model == "kforge-test-model" and checked.stream


def test_the_check_lets_llama_cpp_serve_a_name_it_does_not_list() -> None:
    with ScriptedLLMServer([reply("O", finish_reason="length")], models=("/models/gemma-3-270m.gguf",),
                           dialect="llama.cpp") as server:
        checked = LLMClient(Endpoint(server.base_url, None, "gemma"), timeout=5.0).check()
        [body] = server.chat_requests
    assert checked.model == "gemma" and body["max_tokens"] == 1


def test_the_check_finds_a_server_without_streaming_before_the_run() -> None:
    with ScriptedLLMServer([reply("O")], models=("listed-model",), dialect="no-stream") as server:
        checked = LLMClient(Endpoint(server.base_url, None, "other-name"), timeout=5.0).check()
    assert checked.stream is False and LLMClient(checked)._streams is False


@pytest.mark.parametrize("case", ["refused", "bad key", "vllm unknown model", "ollama unknown model"])
def test_the_check_fails_in_seconds_with_one_line_naming_the_fix(case: str) -> None:
    dialect = "ollama" if case.startswith("ollama") else "vllm"
    with ScriptedLLMServer([], api_key="the-key", dialect=dialect) as server:
        url = "http://127.0.0.1:9/v1" if case == "refused" else server.base_url
        key = "a-wrong-key" if case == "bad key" else "the-key"
        model = "no-such-model" if "unknown" in case else "kforge-test-model"
        started = time.monotonic()
        with pytest.raises(KforgeError) as exc:
            LLMClient(Endpoint(url, key, model), timeout=300.0).check()
    assert time.monotonic() - started < 10
    text = str(exc.value)
    assert "\n" not in text and "a-wrong-key" not in text and "the-key" not in text
    expected = {"refused": ("cannot reach", "OPENAI_BASE_URL"), "bad key": ("rejected the API key", "OPENAI_API_KEY"),
                "vllm unknown model": ("does not serve model 'no-such-model'", "KFORGE_MODEL"),
                "ollama unknown model": ("does not serve model 'no-such-model'", "KFORGE_MODEL")}[case]
    assert all(part in text for part in expected), text
