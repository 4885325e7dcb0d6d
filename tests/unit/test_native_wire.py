"""The native adapters' pure parts: SSE decoding, request bodies, stream translation, error mapping.

These pin the rules the providers enforce (Anthropic's alternation, tool
results first, at most 4 cache breakpoints, thinking budgets below max_tokens)
without a server; the contract suite checks the same adapters end to end.
"""

from __future__ import annotations

import json
import ssl
from typing import Any

import httpx
import pytest

from term2.adapters.llm import anthropic_stream
from term2.adapters.llm import anthropic_wire as aw
from term2.adapters.llm.anthropic_native import AnthropicMessagesProvider, messages_url
from term2.adapters.llm.chat_shapes import ReasoningAssembler, message_to_openai, usage_from
from term2.adapters.llm.http_errors import error_from_event, error_from_response, error_from_transport
from term2.adapters.llm.native_http import timeout_for, tls_for, wire_model
from term2.adapters.llm.openai_native import OpenAIChatProvider
from term2.adapters.llm.openai_wire import OpenAIStream, chat_body
from term2.adapters.llm.sse import SSEDecoder, SSEEvent
from term2.domain.turn import FinishReason
from term2.ports.llm import (
    AuthenticationFailed,
    BadRequest,
    ChatMessage,
    CompletionRequest,
    ContextWindowExceeded,
    Finished,
    LLMError,
    LLMEvent,
    ProviderSettings,
    ProviderTimeout,
    ProviderUnreachable,
    QuotaExceeded,
    RateLimited,
    ReasoningBlock,
    ReasoningReady,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    ToolCallRequest,
    ToolSpec,
    Usage,
)

pytestmark = pytest.mark.anyio

TOOL = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
CALL = ToolCallRequest("call_1", "read_file", '{"path": "a"}')
SIGNED = ReasoningBlock("thinking", "Let me look.", "sig-1")
REDACTED = ReasoningBlock("redacted_thinking", "opaque")


# --------------------------------------------------------------------------- SSE


def test_sse_events_split_anywhere_decode_the_same() -> None:
    raw = (
        b": keep-alive\r\n"
        b'event: message_start\r\ndata: {"a":\r\ndata:  1}\r\n\r\n'
        b"data: caf\xc3\xa9\n\n"
        b"id: 7\nretry: 10\ndata: [DONE]\r\r"
    )
    expected = [
        SSEEvent("message_start", '{"a":\n 1}'),
        SSEEvent("message", "café"),
        SSEEvent("message", "[DONE]"),
    ]
    for size in range(1, len(raw) + 1):
        decoder = SSEDecoder()
        got = [e for i in range(0, len(raw), size) for e in decoder.feed(raw[i : i + size])]
        got += decoder.flush()
        assert got == expected, size
    assert expected[-1].is_done and not expected[0].is_done


def test_sse_ignores_comments_and_empty_events_and_drops_an_unterminated_one() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b": ping\n\nevent: ping\n\n") == []
    assert decoder.feed(b"data: partial") == []
    assert decoder.flush() == []  # no blank line: never dispatched, as the spec says


def test_sse_field_without_colon_and_value_without_space() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data\ndata:x\n\n") == [SSEEvent("message", "\nx")]


# --------------------------------------------------------------------------- shared


def test_wire_model_strips_only_the_provider_prefix() -> None:
    assert wire_model("openai/gpt-5", "openai") == "gpt-5"
    assert wire_model("openrouter/anthropic/claude", "openrouter") == "anthropic/claude"
    assert wire_model("openrouter/anthropic/claude", "openai") == "openrouter/anthropic/claude"
    assert wire_model("gpt-5", "openai") == "gpt-5"
    assert wire_model("openai/gpt-5", None) == "openai/gpt-5"


def test_timeout_bounds_connect_to_ten_seconds() -> None:
    t = timeout_for(120.0)
    assert (t.connect, t.read, t.write, t.pool) == (10.0, 120.0, 120.0, 120.0)
    assert timeout_for(0.5).connect == 0.5


def test_endpoints() -> None:
    assert messages_url("https://api.anthropic.com") == "https://api.anthropic.com/v1/messages"
    assert messages_url("http://proxy/v1/") == "http://proxy/v1/messages"


# --------------------------------------------------------------------------- OpenAI


def test_openai_body() -> None:
    request = CompletionRequest((ChatMessage("user", "hi"),), (TOOL,), max_tokens=50, cache_key="k1")
    body = chat_body(request, "gpt-5", effort="high", reasoning=True)
    assert body["model"] == "gpt-5" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body
    assert body["reasoning_effort"] == "high" and body["prompt_cache_key"] == "k1"
    assert body["tools"][0]["function"]["name"] == "read_file"
    plain = chat_body(CompletionRequest((ChatMessage("user", "hi"),), max_tokens=50), "m", effort="high")
    assert plain["max_tokens"] == 50 and "reasoning_effort" not in plain and "prompt_cache_key" not in plain
    assert "tools" not in plain


def test_openai_body_never_carries_anthropic_reasoning() -> None:
    message = ChatMessage("assistant", "ok", reasoning=(SIGNED,))
    body = chat_body(CompletionRequest((message,)), "m")
    assert "sig-1" not in json.dumps(body)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_openai_stream_translation() -> None:
    stream = OpenAIStream("openai/m", context_window=1000)
    events: list[LLMEvent] = []
    events += stream.feed(_chunk({"role": "assistant", "content": ""}))
    events += stream.feed(_chunk({"reasoning_content": "hmm", "reasoning": "hmm"}))
    events += stream.feed(_chunk({"reasoning": " more"}))
    events += stream.feed(_chunk({"content": "Hi"}))
    events += stream.feed(
        _chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{"}}]})
    )
    events += stream.feed(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}, "tool_calls"))
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 4},
    }
    events += stream.feed({"choices": [], "usage": usage})
    assert stream.complete
    events += stream.finish_events()
    assert events == [
        ThoughtDelta("hmm"),
        ThoughtDelta(" more"),
        TextDelta("Hi"),
        ToolCallReady(ToolCallRequest("c1", "f", "{}")),
        Usage(100, 9, 1000, cached_input_tokens=64, reasoning_tokens=4),
        Finished(FinishReason.TOOL_CALLS),
    ]


def test_openai_in_stream_error_raises_a_server_error() -> None:
    stream = OpenAIStream("openai/m")
    with pytest.raises(LLMError) as caught:
        stream.feed({"error": {"message": "Overloaded now", "type": "server_error"}})
    assert type(caught.value) is LLMError and caught.value.status == 500 and caught.value.transient
    assert str(caught.value) == "Provider error from openai/m: Overloaded now"


# --------------------------------------------------------------------------- Anthropic request


def test_system_messages_become_top_level_blocks() -> None:
    system, messages = aw.to_messages(
        [ChatMessage("system", "One."), ChatMessage("user", "hi"), ChatMessage("system", "Two.")]
    )
    assert system == [{"type": "text", "text": "One."}, {"type": "text", "text": "Two."}]
    assert messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_tool_results_and_the_next_user_message_share_one_user_turn() -> None:
    calls = (CALL, ToolCallRequest("call_2", "read_file", '{"path": "b"}'))
    _, messages = aw.to_messages(
        [
            ChatMessage("user", "Read both."),
            ChatMessage("assistant", "", tool_calls=calls),
            ChatMessage("tool", "A", tool_call_id="call_1"),
            ChatMessage("tool", "", tool_call_id="call_2"),
            ChatMessage("user", "Now compare."),
            ChatMessage("user", ""),  # nothing to send: dropped
        ]
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    last = messages[-1]["content"]
    assert last == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "A"},
        {"type": "tool_result", "tool_use_id": "call_2"},
        {"type": "text", "text": "Now compare."},
    ]


def test_tool_results_come_before_text_in_a_merged_turn() -> None:
    _, messages = aw.to_messages(
        [
            ChatMessage("assistant", "", tool_calls=(CALL,)),
            ChatMessage("user", "By the way."),
            ChatMessage("tool", "A", tool_call_id="call_1"),
        ]
    )
    assert [b["type"] for b in messages[-1]["content"]] == ["tool_result", "text"]


def test_assistant_turn_is_reasoning_then_text_then_tool_use() -> None:
    foreign = ReasoningBlock("thinking", "x", "s", provider="openai")
    message = ChatMessage("assistant", "Reading.", tool_calls=(CALL,), reasoning=(SIGNED, REDACTED, foreign))
    _, messages = aw.to_messages([ChatMessage("user", "go"), message])
    assert messages[-1]["content"] == [
        {"type": "thinking", "thinking": "Let me look.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a"}},
    ]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("", {}),
        ("  ", {}),
        ('{"a": 1}', {"a": 1}),
        ("{broken", {"_raw_arguments": "{broken"}),
        ("[1]", {"_raw_arguments": "[1]"}),
    ],
)
def test_tool_input(arguments: str, expected: dict[str, Any]) -> None:
    assert aw.tool_input(arguments) == expected


def _body(request: CompletionRequest, effort: str | None = None, reasoning: bool = False) -> dict[str, Any]:
    return aw.messages_body(request, "claude", effort=effort, reasoning=reasoning)


def _marked(body: dict[str, Any]) -> int:
    return json.dumps(body).count('"cache_control"')


def test_breakpoints_on_last_tool_last_system_block_and_last_message() -> None:
    request = CompletionRequest(
        (
            ChatMessage("system", "A"),
            ChatMessage("system", "B"),
            ChatMessage("user", "go"),
            ChatMessage("assistant", "", tool_calls=(CALL,), reasoning=(SIGNED,)),
            ChatMessage("tool", "result", tool_call_id="call_1"),
        ),
        (TOOL, ToolSpec("other", "", {"type": "object"})),
    )
    body = _body(request)
    assert "cache_control" not in body["tools"][0] and body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["system"][0] and body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert _marked(body) == 3


def test_breakpoints_skip_thinking_blocks_and_never_exceed_four() -> None:
    body: dict[str, Any] = {
        "tools": [{"name": "t", "cache_control": {"type": "ephemeral"}}],
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "s"}]}],
    }
    aw.place_breakpoints(body)
    assert "cache_control" not in body["messages"][0]["content"][0]
    assert _marked(body) <= aw.MAX_BREAKPOINTS
    aw.place_breakpoints(body)
    aw.place_breakpoints(body)
    assert _marked(body) <= aw.MAX_BREAKPOINTS


def test_effort_table() -> None:
    assert [aw.thinking_budget(e) for e in ("minimal", "low", "medium", "high")] == [1024, 4096, 10000, 32000]
    assert aw.thinking_budget(None) is None and aw.thinking_budget("none") is None
    assert aw.thinking_budget("unheard-of") == 10000


def test_thinking_only_for_reasoning_models_and_always_below_max_tokens() -> None:
    hi = CompletionRequest((ChatMessage("user", "hi"),))
    assert "thinking" not in _body(hi, "high", reasoning=False)
    assert _body(hi)["max_tokens"] == aw.DEFAULT_MAX_TOKENS
    for effort in ("minimal", "low", "medium", "high"):
        body = _body(hi, effort, reasoning=True)
        assert body["thinking"]["type"] == "enabled"
        assert body["thinking"]["budget_tokens"] < body["max_tokens"]
    capped = _body(CompletionRequest(hi.messages, max_tokens=6000), "high", reasoning=True)
    assert capped["max_tokens"] == 6000 and capped["thinking"]["budget_tokens"] == 3000
    tiny = _body(CompletionRequest(hi.messages, max_tokens=1500), "high", reasoning=True)
    assert tiny["max_tokens"] == 1500 and "thinking" not in tiny


def test_thinking_is_left_off_when_the_open_tool_loop_has_no_signed_block() -> None:
    unsigned = (ChatMessage("user", "go"), ChatMessage("assistant", "", tool_calls=(CALL,)))
    tail = (ChatMessage("tool", "r", tool_call_id="call_1"),)
    assert "thinking" not in _body(CompletionRequest((*unsigned, *tail)), "low", reasoning=True)
    signed = (ChatMessage("user", "go"), ChatMessage("assistant", "", tool_calls=(CALL,), reasoning=(SIGNED,)))
    assert "thinking" in _body(CompletionRequest((*signed, *tail)), "low", reasoning=True)


# --------------------------------------------------------------------------- Anthropic stream


def _feed(stream: anthropic_stream.AnthropicStream, events: list[dict[str, Any]]) -> list[LLMEvent]:
    out: list[LLMEvent] = []
    for payload in events:
        out += stream.feed(str(payload["type"]), payload)
    return out + stream.finish_events()


def test_anthropic_stream_translation() -> None:
    stream = anthropic_stream.AnthropicStream("anthropic/claude", context_window=200_000)
    usage = {"input_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20, "output_tokens": 1}
    events = _feed(
        stream,
        [
            {"type": "message_start", "message": {"usage": usage}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hm"}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s1"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "xx"}},
            {"type": "content_block_stop", "index": 1},
            {"type": "ping"},
            {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Hi"}},
            {"type": "content_block_stop", "index": 2},
            {"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "t1", "name": "f"}},
            {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": '{"a"'}},
            {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ": 1}"}},
            {"type": "content_block_stop", "index": 3},
            {"type": "content_block_start", "index": 4, "content_block": {"type": "tool_use", "id": "t2", "name": "g"}},
            {"type": "content_block_stop", "index": 4},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}},
            {"type": "message_stop"},
        ],
    )
    assert stream.complete
    assert events == [
        ThoughtDelta("Hm"),
        ReasoningReady(ReasoningBlock("thinking", "Hm", "s1")),
        ReasoningReady(ReasoningBlock("redacted_thinking", "xx")),
        TextDelta("Hi"),
        ToolCallReady(ToolCallRequest("t1", "f", '{"a": 1}')),
        ToolCallReady(ToolCallRequest("t2", "g", "{}")),
        Usage(125, 42, 200_000, cached_input_tokens=100, cache_write_tokens=20),
        Finished(FinishReason.TOOL_CALLS),
    ]


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("max_tokens", FinishReason.LENGTH),
        ("refusal", FinishReason.CONTENT_FILTER),
        ("tool_use", FinishReason.TOOL_CALLS),
    ],
)
def test_anthropic_stop_reasons(stop: str, expected: FinishReason) -> None:
    stream = anthropic_stream.AnthropicStream("m")
    events = _feed(stream, [{"type": "message_delta", "delta": {"stop_reason": stop}}])
    assert events[-1] == Finished(expected)


def test_anthropic_error_event() -> None:
    stream = anthropic_stream.AnthropicStream("anthropic/claude")
    with pytest.raises(LLMError) as caught:
        stream.feed("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert type(caught.value) is LLMError and caught.value.status == 529 and caught.value.transient
    with pytest.raises(RateLimited):
        stream.feed("error", {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}})


# --------------------------------------------------------------------------- errors


def _openai_error(message: str, code: str | None = None, type_: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}}).encode()


def _anthropic_error(type_: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": type_, "message": message}}).encode()


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (401, _openai_error("Incorrect API key", "invalid_api_key"), AuthenticationFailed),
        (403, _anthropic_error("permission_error", "No"), AuthenticationFailed),
        (429, _openai_error("Rate limit reached", "rate_limit_exceeded", "requests"), RateLimited),
        (
            429,
            _openai_error("You exceeded your current quota", "insufficient_quota", "insufficient_quota"),
            QuotaExceeded,
        ),
        (
            400,
            _openai_error("This model's maximum context length is 8192 tokens", "context_length_exceeded"),
            ContextWindowExceeded,
        ),
        (
            400,
            _anthropic_error("invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"),
            ContextWindowExceeded,
        ),
        (400, _openai_error("Input exceeds the context window of this model"), ContextWindowExceeded),
        (400, _openai_error("Invalid 'tools'"), BadRequest),
        (404, _openai_error("The model does not exist", "model_not_found"), BadRequest),
        (422, b"<html>Unprocessable</html>", BadRequest),
        (500, _openai_error("boom", None, "server_error"), LLMError),
        (529, _anthropic_error("overloaded_error", "Overloaded"), LLMError),
    ],
)
def test_http_error_mapping(status: int, body: bytes, expected: type[LLMError]) -> None:
    error = error_from_response(status, {}, body, "prov/model")
    assert type(error) is expected, repr(error)
    assert error.status == status
    assert str(error).startswith(
        (
            "Authentication failed",
            "Permission denied",
            "Rate limited",
            "Quota",
            "Context",
            "prov/model rejected",
            "Model or endpoint",
            "Provider error",
        )
    )
    assert "prov/model" in str(error) and f"(HTTP {status})" in str(error)
    assert "{" not in str(error), "the provider's sentence, not its JSON"


def test_retry_hints_from_headers_then_message() -> None:
    body = _openai_error("Please try again in 1.5s.", "rate_limit_exceeded")
    assert error_from_response(429, {"Retry-After-Ms": "250"}, body, "m").retry_after == 0.25
    assert error_from_response(429, {"retry-after": "3"}, body, "m").retry_after == 3.0
    assert error_from_response(429, {}, body, "m").retry_after == 1.5
    assert error_from_response(503, {}, b"", "m").retry_after is None


def test_error_messages_read_like_litellm_adapter() -> None:
    error = error_from_response(401, {}, _anthropic_error("authentication_error", "invalid x-api-key"), "anthropic/c")
    assert str(error) == "Authentication failed for anthropic/c (HTTP 401): invalid x-api-key"
    assert str(error_from_response(500, {}, b"", "m")) == "Provider error from m (HTTP 500)"


def test_in_stream_context_error_is_recognised_by_its_words() -> None:
    error = error_from_event({"error": {"message": "maximum context length exceeded"}}, "m")
    assert type(error) is ContextWindowExceeded and error.status == 400


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (httpx.ConnectError("refused"), ProviderUnreachable),
        (httpx.ConnectTimeout("slow"), ProviderTimeout),
        (httpx.ReadTimeout("slow"), ProviderTimeout),
        (httpx.PoolTimeout("full"), ProviderTimeout),
        (httpx.RemoteProtocolError("peer closed"), ProviderUnreachable),
        (httpx.ReadError("reset"), ProviderUnreachable),
        (httpx.UnsupportedProtocol("ftp"), BadRequest),
        (httpx.DecodingError("bad gzip"), LLMError),
    ],
)
def test_transport_error_mapping(exc: Exception, expected: type[LLMError]) -> None:
    error = error_from_transport(exc, "prov/m", "http://x", streaming=False)
    assert type(error) is expected and error.status is None
    assert "prov/m" in str(error)


# --------------------------------------------------------------------------- litellm reasoning round trip


def test_litellm_message_carries_thinking_blocks_only_when_asked() -> None:
    message = ChatMessage("assistant", "", tool_calls=(CALL,), reasoning=(SIGNED, REDACTED))
    assert "thinking_blocks" not in message_to_openai(message)
    out = message_to_openai(message, thinking_blocks=True)
    assert out["thinking_blocks"] == [
        {"type": "thinking", "thinking": "Let me look.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]


def test_litellm_streamed_thinking_blocks_are_reassembled() -> None:
    assembler = ReasoningAssembler()
    for block in (
        {"type": "thinking", "thinking": "Let ", "index": 0},
        {"type": "thinking", "thinking": "me.", "index": 0},
        {"type": "thinking", "thinking": "", "signature": "sig", "index": 0},
        {"type": "redacted_thinking", "data": "opaque", "index": 1},
        {"type": "thinking", "thinking": "unsigned", "index": 2},
    ):
        assembler.add(block)
    assert assembler.ready() == [
        ReasoningReady(ReasoningBlock("thinking", "Let me.", "sig")),
        ReasoningReady(ReasoningBlock("redacted_thinking", "opaque")),
    ]


def test_litellm_usage_details() -> None:
    anthropic_like = {
        "prompt_tokens": 130,
        "completion_tokens": 5,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    }
    assert usage_from(anthropic_like, 9) == Usage(130, 5, 9, cached_input_tokens=100, cache_write_tokens=20)
    assert usage_from({"foo": 1}, None) is None and usage_from(None, None) is None


# --------------------------------------------------------------------------- providers over a mock transport


def _sse(*payloads: tuple[str | None, Any]) -> bytes:
    out = b""
    for event, data in payloads:
        if event:
            out += f"event: {event}\n".encode()
        out += b"data: " + (data if isinstance(data, str) else json.dumps(data)).encode() + b"\n\n"
    return out


async def _run(provider: OpenAIChatProvider | AnthropicMessagesProvider) -> list[LLMEvent]:
    try:
        return [e async for e in provider.stream(CompletionRequest((ChatMessage("user", "hi"),)))]
    finally:
        await provider.aclose()


async def test_openai_provider_default_endpoint_and_headers() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = _sse((None, _chunk({"content": "ok"}, "stop")), (None, "[DONE]"))
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    settings = ProviderSettings("openai/gpt-5", api_key="sk-1")
    events = await _run(OpenAIChatProvider(settings, httpx.MockTransport(handler)))
    assert events == [TextDelta("ok"), Finished(FinishReason.STOP)]
    assert str(seen[0].url) == "https://api.openai.com/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer sk-1"
    assert json.loads(seen[0].content)["model"] == "gpt-5"


async def test_openai_provider_without_key_sends_no_authorization() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=_sse((None, _chunk({}, "stop")), (None, "[DONE]")))

    await _run(
        OpenAIChatProvider(ProviderSettings("llama", api_base="http://local:8080"), httpx.MockTransport(handler))
    )
    assert str(seen[0].url) == "http://local:8080/chat/completions" and "authorization" not in seen[0].headers


async def test_a_stream_cut_short_is_an_error_not_a_stop() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_sse((None, _chunk({"content": "par"}))))

    with pytest.raises(LLMError, match="ended before the response was complete"):
        await _run(OpenAIChatProvider(ProviderSettings("openai/m"), httpx.MockTransport(handler)))


async def test_anthropic_provider_endpoint_headers_and_error_body() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(429, content=_anthropic_error("rate_limit_error", "Slow"), headers={"retry-after": "4"})

    settings = ProviderSettings("anthropic/claude-x", api_key="k-1")
    with pytest.raises(RateLimited) as caught:
        await _run(AnthropicMessagesProvider(settings, httpx.MockTransport(handler)))
    assert caught.value.retry_after == 4.0 and caught.value.status == 429
    assert str(seen[0].url) == "https://api.anthropic.com/v1/messages"
    assert seen[0].headers["x-api-key"] == "k-1" and seen[0].headers["anthropic-version"] == "2023-06-01"
    assert json.loads(seen[0].content)["model"] == "claude-x"


async def test_anthropic_provider_streams_through_the_transport() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = _sse(
            ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
            ),
            ("message_stop", {"type": "message_stop"}),
        )
        return httpx.Response(200, content=body)

    events = await _run(AnthropicMessagesProvider(ProviderSettings("anthropic/c"), httpx.MockTransport(handler)))
    assert events == [TextDelta("ok"), Usage(3, 2), Finished(FinishReason.STOP)]


async def test_transport_failure_before_the_response_is_mapped() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(ProviderUnreachable, match="Cannot reach openai/m at http://nowhere"):
        await _run(
            OpenAIChatProvider(ProviderSettings("openai/m", api_base="http://nowhere"), httpx.MockTransport(handler))
        )


@pytest.mark.parametrize("base", ["http://127.0.0.1:11434/v1", "HTTP://localhost:8000"])
def test_a_plain_http_base_skips_the_ca_bundle_but_still_refuses_unverified_tls(base: str) -> None:
    context = tls_for(base, {"PATH": "/usr/bin"})
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0  # trusts no authority: any TLS handshake fails


@pytest.mark.parametrize(
    ("base", "env"),
    [
        ("https://api.openai.com/v1", {}),
        ("http://127.0.0.1:8000/v1", {"HTTP_PROXY": "https://proxy.corp:3128"}),
        ("http://127.0.0.1:8000/v1", {"all_proxy": "socks5://proxy:1080"}),
    ],
)
def test_tls_keeps_httpx_defaults_wherever_tls_can_happen(base: str, env: dict[str, str]) -> None:
    assert tls_for(base, env) is True


@pytest.mark.anyio
async def test_a_tls_setup_that_fails_is_the_ports_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A CA file that cannot be read fails the request as an LLMError, never as a bare OSError."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    provider = OpenAIChatProvider(ProviderSettings(model="openai/gpt-x", api_base="https://api.example/v1"))
    request = CompletionRequest(messages=(ChatMessage("user", "hi"),))
    with pytest.raises(LLMError, match="cannot set up TLS"):
        async for _ in provider.stream(request):
            pass
    await provider.aclose()


@pytest.mark.parametrize(
    ("max_output", "expected_max", "expected_budget"),
    [
        (None, 32000 + aw.ANSWER_ROOM, 32000),  # no limit known: thinking plus room for the answer
        (64000, 32000 + aw.ANSWER_ROOM, 32000),  # under the model's limit: unchanged
        (32000, 32000, 32000 - aw.ANSWER_ROOM),  # Opus 4's limit: thinking shrinks, the answer keeps its room
        (1500, 1500, None),  # too small to think in: no thinking at all
    ],
)
def test_thinking_never_asks_for_more_than_the_model_can_answer(
    max_output: int | None, expected_max: int, expected_budget: int | None
) -> None:
    request = CompletionRequest(messages=(ChatMessage("user", "hi"),))
    body = aw.messages_body(request, "claude", effort="high", reasoning=True, max_output=max_output)
    assert body["max_tokens"] == expected_max
    assert body.get("thinking", {}).get("budget_tokens") == expected_budget
    if expected_budget is not None:
        assert expected_budget < body["max_tokens"]  # Anthropic's rule


def test_the_catalog_carries_a_models_output_limit() -> None:
    from term2.adapters.catalog.litellm_catalog import _entry

    info = _entry("anthropic.claude-opus-4-1-20250805-v1:0")
    assert info is not None and info.max_output_tokens == 32000
