"""The scripted server itself: its wire format must match OpenAI's, or the client tests prove nothing."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from fakes.llm_server import HTTPError, ScriptedLLMServer, rate_limited, reply


def post(url: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, dict, dict]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


REQUEST = {"model": "kforge-test-model", "messages": [{"role": "user", "content": "Write a softmax kernel please."}]}


def test_chat_completion_wire_format():
    with ScriptedLLMServer([reply("```python\nx = 1\n```", prompt_tokens=17, completion_tokens=9)]) as s:
        status, headers, body = post(s.base_url + "/chat/completions", REQUEST)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert set(body) >= {"id", "object", "created", "model", "choices", "usage"}
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert isinstance(body["created"], int) and body["model"] == "kforge-test-model"
    (choice,) = body["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"] == "```python\nx = 1\n```"
    assert body["usage"] == {"prompt_tokens": 17, "completion_tokens": 9, "total_tokens": 26}


def test_default_usage_is_estimated_from_the_texts():
    with ScriptedLLMServer([reply("y" * 40)]) as s:
        _, _, body = post(s.base_url + "/chat/completions", REQUEST)
    assert body["usage"]["completion_tokens"] == 10
    assert body["usage"]["prompt_tokens"] == len(REQUEST["messages"][0]["content"]) // 4 + 4


def test_the_openai_client_parses_it():
    openai = pytest.importorskip("openai")
    with ScriptedLLMServer([reply("hello", prompt_tokens=3, completion_tokens=1)]) as s:
        client = openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0)
        completion = client.chat.completions.create(**REQUEST)
        models = client.models.list()
    assert completion.choices[0].message.content == "hello"
    assert completion.usage.total_tokens == 4
    assert [m.id for m in models.data] == ["kforge-test-model"]


def test_errors_in_openai_format_with_headers():
    with ScriptedLLMServer([rate_limited(1.5), HTTPError(503, "overloaded")]) as s:
        status, headers, body = post(s.base_url + "/chat/completions", REQUEST)
        assert status == 429 and headers["retry-after"] == "1.5"
        assert body["error"]["code"] == "rate_limit_exceeded" and "Rate limit" in body["error"]["message"]
        assert set(body["error"]) == {"message", "type", "param", "code"}
        status, _, body = post(s.base_url + "/chat/completions", REQUEST)
        assert status == 503 and body["error"]["message"] == "overloaded"


def test_records_every_request_and_fails_loudly_when_the_script_runs_out():
    with ScriptedLLMServer([reply("only one")]) as s:
        post(s.base_url + "/chat/completions", REQUEST)
        status, _, body = post(s.base_url + "/chat/completions", {**REQUEST, "temperature": 0})
        assert status == 400 and body["error"]["code"] == "script_exhausted"
        assert s.chat_requests == [REQUEST, {**REQUEST, "temperature": 0}]
        assert s.prompts() == ["Write a softmax kernel please."] * 2


def test_rejects_malformed_requests_and_wrong_keys():
    with ScriptedLLMServer([reply("unused")], api_key="sk-right") as s:
        status, _, body = post(s.base_url + "/chat/completions", REQUEST, {"Authorization": "Bearer sk-wrong"})
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
        auth = {"Authorization": "Bearer sk-right"}
        assert post(s.base_url + "/chat/completions", {"messages": REQUEST["messages"]}, auth)[0] == 400
        assert post(s.base_url + "/chat/completions", {"model": "m", "messages": [{"role": "robot", "content": "x"}]}, auth)[0] == 400
        assert post(s.base_url + "/completions", REQUEST, auth)[0] == 404
        assert s.remaining == 1  # none of those consumed the scripted reply


def test_a_streamed_reply_is_server_sent_chunks_then_usage_then_done():
    request = {**REQUEST, "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 50}
    with ScriptedLLMServer([reply("abcdefghij", prompt_tokens=7, completion_tokens=3, piece_chars=4)]) as s:
        req = urllib.request.Request(s.base_url + "/chat/completions", data=json.dumps(request).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.headers["Content-Type"] == "text/event-stream"
            lines = [line for line in resp.read().decode().split("\n\n") if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "abcdefghij"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {"prompt_tokens": 7, "completion_tokens": 3,
                                                                   "total_tokens": 10}


def test_llama_cpp_and_vllm_refusals_in_their_own_words():
    long = {**REQUEST, "messages": [{"role": "user", "content": "x" * 4000}], "max_tokens": 100}
    with ScriptedLLMServer([], n_ctx=512) as s:
        status, _, body = post(s.base_url + "/chat/completions", long)
    assert status == 400 and body["error"]["type"] == "exceed_context_size_error"
    assert body["error"]["n_ctx"] == 512 and body["error"]["n_prompt_tokens"] == 1004
    assert body["error"]["message"] == ("request (1004 tokens) exceeds the available context size (512 tokens), "
                                        "try increasing it")
    with ScriptedLLMServer([], max_model_len=1050) as s:
        status, _, body = post(s.base_url + "/chat/completions", long)
    assert status == 400 and body["object"] == "error" and body["type"] == "BadRequestError"
    assert body["message"].startswith("This model's maximum context length is 1050 tokens. However, you requested "
                                      "1104 tokens (1004 in the messages, 100 in the completion).")
