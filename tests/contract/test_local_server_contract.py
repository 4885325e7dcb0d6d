"""Issue 33 contract: the native OpenAI-compatible adapter against the fake's llama.cpp-like mode, and the
fake against the real llama-cpp-python 0.3.36 server's captured answers to term2's own requests.

The captures (`tests/fakes/captures/llama-cpp-python-0.3.36/`, copied from the measuring run: each `X.raw`
the whole HTTP answer to `X.request.json`) are replayed at the fake, and its answer must match byte for
byte once the values that change every run (ids, times, token counts of another tokenizer) are masked.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from term2.adapters.llm.openai_native import OpenAIChatProvider
from term2.domain.transcript import ChatMessage
from term2.domain.turn import FinishReason
from term2.ports.llm import (
    CompletionRequest,
    Finished,
    IncompleteResponse,
    LLMEvent,
    PromptCount,
    ProviderSettings,
    RequestOptions,
    ToolCallReady,
    ToolSpec,
    Usage,
)
from tests.fakes.llama_cpp_like import LlamaSettings, prompt_tokens
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm

CAPTURES = Path(__file__).parents[1] / "fakes" / "captures" / "llama-cpp-python-0.3.36"
TOOL = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})
REQUEST = CompletionRequest((ChatMessage("system", "You help."), ChatMessage("user", "Read a.txt")), (TOOL,))
pytestmark = pytest.mark.anyio
CALL = {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}


@pytest.fixture(scope="module")
def llama() -> Iterator[FakeLLMServer]:
    settings = LlamaSettings(n_ctx=8192, tool_format="chatml-function-calling")
    with start_fake_llm(llama_cpp=settings) as server:
        yield server


def provider(server: FakeLLMServer, **options: Any) -> OpenAIChatProvider:
    settings = ProviderSettings(
        model="openai/gemma", api_base=server.base_url + "/v1", request_options=RequestOptions(**options)
    )
    return OpenAIChatProvider(settings)


async def events_of(server: FakeLLMServer, reply: dict[str, Any], **options: Any) -> list[LLMEvent]:
    server.state.reset()
    server.push(reply)
    llm = provider(server, **options)
    try:
        return [event async for event in llm.stream(REQUEST)]
    finally:
        await llm.aclose()


# --------------------------------------------------------------------------- the adapter


async def test_a_whole_answer_gives_the_same_events_as_a_stream(llama: FakeLLMServer) -> None:
    events = await events_of(llama, CALL, tool_choice="auto", stream=False)
    [call] = [e for e in events if isinstance(e, ToolCallReady)]
    assert call.call.name == "read_file" and json.loads(call.call.arguments) == {"path": "a.txt"}
    [usage] = [e for e in events if isinstance(e, Usage)]
    assert usage.input_tokens == prompt_tokens(llama.requests[-1].body, llama.state.llama_cpp)  # type: ignore[arg-type]
    assert isinstance(events[-1], Finished) and events[-1].reason is FinishReason.TOOL_CALLS
    body = llama.requests[-1].body
    assert body["stream"] is False and "stream_options" not in body


async def test_a_streamed_auto_that_picks_a_tool_is_an_empty_answer_naming_tool_choice(llama: FakeLLMServer) -> None:
    with pytest.raises(IncompleteResponse) as caught:
        await events_of(llama, CALL, tool_choice="auto")
    assert caught.value.empty and caught.value.tool_choice == "auto"
    assert "empty answer" in str(caught.value) and "its log" in str(caught.value)


async def test_count_prompt_is_the_servers_whole_count(llama: FakeLLMServer) -> None:
    llama.state.reset()
    llm = provider(llama)
    try:
        count = await llm.count_prompt(REQUEST)
    finally:
        await llm.aclose()
    [probe] = llama.requests
    assert probe.body["stream"] is False and probe.body["max_tokens"] == 1
    assert count == PromptCount(prompt_tokens(probe.body, llama.state.llama_cpp), whole=True)  # type: ignore[arg-type]


async def test_count_prompt_falls_back_to_the_tokenize_endpoint(llama: FakeLLMServer) -> None:
    """ "required" is a 500 when not streamed (measured): the count comes from /extras/tokenize, text only."""
    llama.state.reset()
    before = llama.state.tokenized
    llm = provider(llama, tool_choice="required")
    try:
        count = await llm.count_prompt(REQUEST)
    finally:
        await llm.aclose()
    assert llama.requests[-1].status == "error" and llama.state.tokenized == before + 1
    assert count is not None and not count.whole and count.tokens > 0


async def test_count_prompt_takes_llama_cpps_own_tokenize_endpoint() -> None:
    """llama.cpp's `llama-server` has no `/extras/tokenize`; its `POST /tokenize` takes `{"content": str}` and
    answers `{"tokens": [...]}` (its README). A stand-in that answers the count request without usage, 404s
    the llama-cpp-python route and tokenizes on its own gives the count from there."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[tuple[str, Any]] = []

    class LlamaServer(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append((self.path, body))
            if self.path == "/v1/chat/completions":
                status, answer = 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}]}
            elif self.path == "/tokenize" and isinstance(body.get("content"), str):
                status, answer = 200, {"tokens": list(range(len(body["content"]) // 4))}
            else:
                status, answer = 404, {"error": {"code": 404, "message": "File Not Found"}}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), LlamaServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings = ProviderSettings(model="openai/qwen", api_base=f"http://127.0.0.1:{server.server_address[1]}/v1")
    llm = OpenAIChatProvider(settings)
    try:
        count = await llm.count_prompt(REQUEST)
    finally:
        await llm.aclose()
        server.shutdown()
        server.server_close()
    assert [path for path, _ in seen] == ["/v1/chat/completions", "/extras/tokenize", "/tokenize"]
    text = "\n".join(m.content for m in REQUEST.messages)
    assert seen[-1][1] == {"content": text}
    assert count == PromptCount(len(text) // 4, whole=False)


# --------------------------------------------------------------------------- the fake, against the captures


def _raw_answer(server: FakeLLMServer, body: bytes) -> bytes:
    """The whole HTTP answer to one POST, as the capture holds it (read until the server closes or it is whole)."""
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


_VOLATILE = [
    (rb'"id":"[^"]*"', b'"id":"*"'),
    (rb'"created":\d+', b'"created":0'),
    (rb'"model":"[^"]*"', b'"model":"*"'),
    (rb'"(prompt|completion|total)_tokens":\d+', rb'"\1_tokens":0'),
    (rb'"arguments":"(?:[^"\\]|\\.)*"', b'"arguments":"*"'),
    (rb'"name":"[^"]*"', b'"name":"*"'),
]


def _masked_body(raw: bytes) -> bytes:
    body = raw.partition(b"\r\n\r\n")[2]
    for pattern, replacement in _VOLATILE:
        body = re.sub(pattern, replacement, body)
    return body


def _status_and_type(raw: bytes) -> tuple[bytes, bytes]:
    head = raw.partition(b"\r\n\r\n")[0].split(b"\r\n")
    kind = next((line.split(b":", 1)[1].strip() for line in head if line.lower().startswith(b"content-type:")), b"")
    return head[0], kind


@pytest.mark.parametrize(
    ("capture", "reply"),
    [
        ("term2-auto-nostream", {"tool_calls": [{"name": "list_dir", "arguments": {"path": "project.toml"}}]}),
        ("term2-plain-nostream", {"text": ""}),
        ("term2-required-nostream", {"text": "unused"}),
        ("term2-required-stream", {"text": "unused"}),
    ],
)
def test_the_fake_answers_terms_requests_as_the_real_server_did(
    llama: FakeLLMServer, capture: str, reply: dict[str, Any]
) -> None:
    real = (CAPTURES / f"{capture}.raw").read_bytes()
    llama.state.reset()
    llama.push(reply)
    fake = _raw_answer(llama, (CAPTURES / f"{capture}.request.json").read_bytes())
    assert _status_and_type(fake) == _status_and_type(real), (fake[:400], real[:400])
    assert _masked_body(fake) == _masked_body(real), (_masked_body(fake), _masked_body(real))


def test_a_streamed_auto_that_picks_a_tool_ends_as_the_real_server_did(llama: FakeLLMServer) -> None:
    """The real answer was the SSE headers, one ping (the model took 26 s to choose) and the last chunk; the
    fake sends no ping (it chooses at once), so the rest must be the same: no event, then `0\\r\\n\\r\\n`."""
    real = (CAPTURES / "term2-auto-stream.raw").read_bytes()
    llama.state.reset()
    llama.push({"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]})
    fake = _raw_answer(llama, (CAPTURES / "term2-auto-stream.request.json").read_bytes())
    assert _status_and_type(fake) == _status_and_type(real)
    assert real.endswith(b"\r\n0\r\n\r\n") and fake.partition(b"\r\n\r\n")[2] == b"0\r\n\r\n", fake
    assert b"data:" not in real and b"data:" not in fake
