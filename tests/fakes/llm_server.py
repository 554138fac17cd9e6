"""A scripted OpenAI-compatible server on 127.0.0.1, for tests that use the real `openai` client.

It speaks the documented wire format (POST /v1/chat/completions returning a `chat.completion` object, or
with `"stream": true` server-sent `chat.completion.chunk` events ending in `data: [DONE]`, the usage in a last
chunk when `stream_options.include_usage` asks for it; GET /v1/models returning a list; errors as
{"error": {message, type, param, code}}), replays a queue of scripted responses in order, and records every
request so a test can assert what each prompt held.

It also plays what local servers do, in their own words (read from llama.cpp's tools/server and vLLM's
serving layer): `n_ctx` refuses a prompt of that many tokens or more as llama.cpp does
(`exceed_context_size_error`, with `n_prompt_tokens` and `n_ctx`); `max_model_len` refuses prompt + max_tokens
over the window as vLLM does; `strict_models` answers an unknown model name with vLLM's 404; `Die` drops the
connection mid-reply and stops listening, as a server that crashed.

    with ScriptedLLMServer([rate_limited(0.01), reply("```python\\n...\\n```")]) as server:
        client = LLMClient(Endpoint(server.base_url, "test-key", "kforge-test-model"))
        ...
        assert "error: expected" in server.chat_requests[1]["messages"][-1]["content"]

`dialect` plays the reply shapes of servers that differ from OpenAI's (each from its own docs or tracker):
- "llama.cpp": usage (with llama.cpp's `timings`) rides on the chunk that carries the finish reason, not on a last
  chunk of its own (ggml-org/llama.cpp#15443); /v1/models names the one model, `owned_by: llamacpp`; any model
  name is served.
- "vllm": OpenAI's stream (usage in a last chunk with no choices); an unknown model is vLLM's 404 (strict).
- "ollama": OpenAI's stream with `system_fingerprint: fp_ollama`; an unknown model is a 404 whose message says to
  pull it (strict).
- "json-proxy": answers a streamed request with one ordinary `chat.completion` (Content-Type application/json).
- "no-stream": refuses `stream` itself with HTTP 400, as a server without streaming does.

A request that finds the queue empty gets HTTP 400 "scripted server: no response queued", so a test
that makes more calls than it scripted fails loudly rather than hanging.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable, Union

DEFAULT_MODEL = "kforge-test-model"
DIALECTS = ("openai", "llama.cpp", "vllm", "ollama", "json-proxy", "no-stream")


@dataclass
class Text:
    """A 200 chat.completion whose first choice says `content`."""

    content: str
    prompt_tokens: int | None = None  # None: estimated from the request, as a tokenizer would roughly count
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    delay: float = 0.0  # seconds before answering (longer than the client's timeout = a timeout): a slow first token
    omit_usage: bool = False  # some servers send no usage block
    piece_delay: float = 0.0  # streamed: seconds between two pieces of the reply (a slow model that keeps writing)
    piece_chars: int = 16  # streamed: characters per piece


@dataclass
class HTTPError:
    """An error response in OpenAI's format, e.g. 429 with Retry-After, 500, 401."""

    status: int
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    error_type: str = "server_error"
    code: str | int | None = None
    delay: float = 0.0
    body: dict[str, Any] | None = None  # the exact body, for servers whose errors differ from OpenAI's


@dataclass
class Die:
    """The server crashes: the reply breaks off after `after_chars` streamed characters (a request that is not
    streamed gets nothing), the connection drops and the server stops listening (later requests: refused)."""

    after_chars: int = 0


Response = Union[Text, HTTPError, Die]


def reply(content: str, **kwargs: Any) -> Text:
    return Text(content, **kwargs)


def rate_limited(retry_after: float | None = 0.01, *, header: str = "retry-after") -> HTTPError:
    """429 as OpenAI sends it; `header` may be "retry-after" (seconds) or "retry-after-ms"."""
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers[header] = str(int(retry_after * 1000)) if header == "retry-after-ms" else f"{retry_after:g}"
    return HTTPError(
        429,
        "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1.",
        headers,
        error_type="requests",
        code="rate_limit_exceeded",
    )


def server_error(status: int = 500, message: str = "The server had an error while processing your request.") -> HTTPError:
    return HTTPError(status, message, error_type="server_error")


def llama_cpp_context_exceeded(n_prompt_tokens: int, n_ctx: int) -> HTTPError:
    """llama.cpp's refusal of a prompt that does not fit its context window (tools/server, as of 2026)."""
    message = (f"request ({n_prompt_tokens} tokens) exceeds the available context size ({n_ctx} tokens), "
               "try increasing it")
    return HTTPError(400, message, body={"error": {"code": 400, "message": message, "type": "exceed_context_size_error",
                                                   "n_prompt_tokens": n_prompt_tokens, "n_ctx": n_ctx}})


def vllm_window_exceeded(max_model_len: int, prompt_tokens: int, max_tokens: int) -> HTTPError:
    """vLLM's refusal of prompt + max_tokens over the model's window (its body has no "error" wrapper)."""
    message = (f"This model's maximum context length is {max_model_len} tokens. However, you requested "
               f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the completion). "
               "Please reduce the length of the messages or completion.")
    return HTTPError(400, message, body={"object": "error", "message": message, "type": "BadRequestError",
                                         "param": None, "code": 400})


def stall(seconds: float) -> Text:
    """A response that arrives only after `seconds`: a client with a shorter timeout sees a timeout."""
    return Text("(arrived too late)", delay=seconds)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it was not JSON
    at: float


def _estimate(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class ScriptedLLMServer:
    def __init__(self, responses: Iterable[Response] = (), *, models: Iterable[str] = (DEFAULT_MODEL,),
                 api_key: str | None = None, n_ctx: int | None = None, max_model_len: int | None = None,
                 strict_models: bool = False, dialect: str = "openai"):
        assert dialect in DIALECTS, dialect
        self.dialect = dialect
        strict_models = strict_models or dialect in ("vllm", "ollama")
        self._queue: deque[Response] = deque(responses)
        self.models = list(models)
        self.api_key = api_key  # when set, other keys get 401 like the real API
        self.n_ctx = n_ctx  # llama.cpp: a prompt of this many tokens or more is refused
        self.max_model_len = max_model_len  # vLLM: prompt + max_tokens over this is refused
        self.strict_models = strict_models  # vLLM, Ollama: a model name it does not serve is a 404
        self.died = False
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------------------------
    def start(self) -> ScriptedLLMServer:
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits for one, and tests start many servers.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping on a scripted delay
        if self._httpd is not None:
            if not self.died:
                self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # script and records ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "start the server first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def push(self, *responses: Response) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def chat_requests(self) -> list[Any]:
        """Bodies of every POST /v1/chat/completions, in arrival order (retries included)."""
        with self._lock:
            return [r.body for r in self.requests if r.method == "POST" and r.path.endswith("/chat/completions")]

    def prompts(self) -> list[str]:
        """For each chat request, all its message contents joined: handy for `in` assertions."""
        return ["\n".join(str(m.get("content", "")) for m in body.get("messages", [])) for body in self.chat_requests]

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next(self) -> Response | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None


def _error_body(message: str, error_type: str, code: str | int | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def prompt_tokens_of(request: dict[str, Any]) -> int:
    """Roughly what a tokenizer gives: chars/4 plus a few per message."""
    return sum(_estimate(m["content"]) + 4 for m in request["messages"])


def _make_handler(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            return

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a scripted timeout): nothing to deliver

        def _authorised(self) -> bool:
            if server.api_key is None:
                return True
            if self.headers.get("Authorization") == f"Bearer {server.api_key}":
                return True
            self._send(401, _error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"))
            return False

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            server._record(RecordedRequest("GET", self.path, dict(self.headers), None, time.time()))
            if not self._authorised():
                return
            if self.path.rstrip("/").endswith("/models"):
                created = int(time.time())
                owner = "llamacpp" if server.dialect == "llama.cpp" else "kforge-tests"
                data = [{"id": m, "object": "model", "created": created, "owned_by": owner} for m in server.models]
                self._send(200, {"object": "list", "data": data})
            else:
                self._send(404, _error_body(f"Unknown request URL: GET {self.path}.", "invalid_request_error", "unknown_url"))

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8", "replace")
            try:
                body: Any = json.loads(raw)
            except json.JSONDecodeError:
                body = raw
            server._record(RecordedRequest("POST", self.path, dict(self.headers), body, time.time()))
            if not self._authorised():
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, _error_body(f"Unknown request URL: POST {self.path}.", "invalid_request_error", "unknown_url"))
                return
            problem = _validate(body)
            if problem:
                self._send(400, _error_body(problem, "invalid_request_error", None))
                return
            refusal = _server_refusal(server, body)
            scripted = refusal or server._next()
            if scripted is None:
                self._send(400, _error_body("scripted server: no response queued", "invalid_request_error", "script_exhausted"))
                return
            if isinstance(scripted, Die):
                self._die(body, scripted)
                return
            if scripted.delay and server._stop.wait(scripted.delay):
                return  # shutting down
            if isinstance(scripted, HTTPError):
                error = scripted.body or _error_body(scripted.message, scripted.error_type, scripted.code)
                self._send(scripted.status, error, scripted.headers)
                return
            if body.get("stream") and server.dialect == "no-stream":
                server._queue.appendleft(scripted)  # refused before any reply is spent
                self._send(400, _error_body("streaming is not supported by this server", "invalid_request_error",
                                            None))
                return
            if body.get("stream") and server.dialect != "json-proxy":
                self._stream(body, scripted)
                return
            # Not streamed: the whole reply arrives once it is all written, as from a real server.
            if scripted.piece_delay and server._stop.wait(scripted.piece_delay * (len(_pieces(scripted)) - 1)):
                return
            self._send(200, _completion(body, scripted))

        def _start_stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")  # the stream's end is the connection's end
            self.end_headers()
            self.close_connection = True

        def _event(self, payload: Any) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

        def _stream(self, request: dict[str, Any], scripted: Text) -> None:
            try:
                self._start_stream()
                for chunk in _chunks(request, scripted, server.dialect):
                    if chunk.get("_pause") is not None:
                        if server._stop.wait(chunk["_pause"]):
                            return
                        continue
                    self._event(chunk)
                self._event("[DONE]")
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _die(self, request: dict[str, Any], scripted: Die) -> None:
            """Part of a reply (when streamed), then the connection and the listening socket go."""
            try:
                if request.get("stream") and scripted.after_chars:
                    self._start_stream()
                    partial = Text(str(request.get("_die_text", "x" * scripted.after_chars))[: scripted.after_chars])
                    for chunk in _chunks(request, partial):
                        if chunk.get("_pause") is None and chunk.get("choices") and chunk["choices"][0]["finish_reason"] is None:
                            self._event(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            server.died = True
            self.close_connection = True
            httpd = server._httpd
            assert httpd is not None
            # The listening socket goes first, before the client sees the drop: a client that retries at once must
            # be refused, not queued on a backlog nobody accepts from (under load it was, and timed out instead).
            try:
                httpd.socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

            def go_away() -> None:  # stop serving, then stop listening: later connections are refused
                httpd.shutdown()
                httpd.server_close()

            threading.Thread(target=go_away, daemon=True).start()

    return Handler


def _server_refusal(server: ScriptedLLMServer, request: dict[str, Any]) -> HTTPError | None:
    """What a local server refuses by itself, before any scripted reply is spent."""
    if server.strict_models and request["model"] not in server.models and server.dialect == "ollama":
        message = f'model "{request["model"]}" not found, try pulling it first'
        return HTTPError(404, message, body=_error_body(message, "api_error", None))
    if server.strict_models and request["model"] not in server.models:
        message = f"The model `{request['model']}` does not exist."
        return HTTPError(404, message, body={"object": "error", "message": message, "type": "NotFoundError",
                                             "param": None, "code": 404})
    prompt = prompt_tokens_of(request)
    if server.n_ctx is not None and prompt >= server.n_ctx:
        return llama_cpp_context_exceeded(prompt, server.n_ctx)
    limit = request.get("max_tokens") or request.get("max_completion_tokens") or 0
    if server.max_model_len is not None and prompt + int(limit) > server.max_model_len:
        return vllm_window_exceeded(server.max_model_len, prompt, int(limit))
    return None


def _pieces(scripted: Text) -> list[str]:
    size = max(1, scripted.piece_chars)
    return [scripted.content[i:i + size] for i in range(0, len(scripted.content), size)]


def _chunks(request: dict[str, Any], scripted: Text, dialect: str = "openai") -> list[dict[str, Any]]:
    """The reply as `chat.completion.chunk` events (and `{"_pause": s}` markers between pieces)."""
    fingerprint = "fp_ollama" if dialect == "ollama" else "fp_kforge_tests"
    base = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": request["model"], "system_fingerprint": fingerprint}
    with_usage = bool((request.get("stream_options") or {}).get("include_usage")) and not scripted.omit_usage

    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        out = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if with_usage:
            out["usage"] = None  # OpenAI sends it null on every chunk but the last
        return out

    out = [chunk({"role": "assistant", "content": "", "refusal": None}, None)]
    for i, piece in enumerate(_pieces(scripted)):
        if i and scripted.piece_delay:
            out.append({"_pause": scripted.piece_delay})
        out.append(chunk({"content": piece}, None))
    out.append(chunk({}, scripted.finish_reason))
    if with_usage:
        prompt = scripted.prompt_tokens if scripted.prompt_tokens is not None else prompt_tokens_of(request)
        done = scripted.completion_tokens if scripted.completion_tokens is not None else _estimate(scripted.content)
        usage = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
        if dialect == "llama.cpp":  # on the finishing chunk, beside llama.cpp's timings
            out[-1].update(usage=usage, timings={"prompt_n": prompt, "predicted_n": done, "predicted_ms": 1.0})
        else:
            out.append({**base, "choices": [], "usage": usage})
    return out


def _validate(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "We could not parse the JSON body of your request."
    if not body.get("model"):
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "developer", "tool"):
            return f"Invalid value for 'messages[{i}].role'"
        if not isinstance(m.get("content"), str):
            return f"Invalid type for 'messages[{i}].content': expected a string"
    if "stream" in body and not isinstance(body["stream"], bool):
        return "Invalid type for 'stream': expected a boolean"
    if "stream_options" in body and not body.get("stream"):
        return "The 'stream_options' parameter is only allowed when 'stream' is enabled."
    for key in ("max_tokens", "max_completion_tokens"):
        if key in body and (not isinstance(body[key], int) or body[key] < 1):
            return f"Invalid '{key}': integer below minimum value. Expected a value >= 1"
    return None


def _completion(request: dict[str, Any], scripted: Text) -> dict[str, Any]:
    prompt = scripted.prompt_tokens
    if prompt is None:
        prompt = prompt_tokens_of(request)
    completion = scripted.completion_tokens if scripted.completion_tokens is not None else _estimate(scripted.content)
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request["model"],
        "system_fingerprint": "fp_kforge_tests",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": scripted.content, "refusal": None},
                "logprobs": None,
                "finish_reason": scripted.finish_reason,
            }
        ],
    }
    if not scripted.omit_usage:
        body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return body
