"""One contract suite for every LLMProvider adapter.

The same scripted replies run against the ScriptedProvider, litellm speaking
the OpenAI chat-completions protocol, litellm speaking the Anthropic Messages
protocol, and the native httpx adapters for both protocols (all four to the
local fake server). Passing all five shows that swapping providers (or the
adapter behind one) is configuration only, and that the port semantics (event
order, one Finished, error mapping, stream closing) do not depend on the wire.
A case that cannot apply to an adapter is skipped with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread
import pytest

from term2.adapters.llm import provider_words, retry_hints
from term2.adapters.llm.anthropic_native import AnthropicMessagesProvider
from term2.adapters.llm.litellm_provider import LiteLLMProvider
from term2.adapters.llm.openai_native import OpenAIChatProvider
from term2.adapters.llm.scripted import ScriptedProvider
from term2.domain.turn import FinishReason
from term2.ports.llm import (
    AuthenticationFailed,
    BadRequest,
    ChatMessage,
    CompletionRequest,
    ContextWindowExceeded,
    Finished,
    IncompleteResponse,
    LLMError,
    LLMEvent,
    LLMProvider,
    ProviderSettings,
    ProviderTimeout,
    ProviderUnreachable,
    QuotaExceeded,
    RateLimited,
    ReasoningReady,
    RequestOptions,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    ToolCallRequest,
    ToolSpec,
    Usage,
)
from tests.fakes.llama_cpp_like import LlamaSettings
from tests.fakes.llm_server import QUOTA_EXCEEDED, FakeLLMServer, start_fake_llm, text_pieces
from tests.support.net import closed_port

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

CONTEXT_WINDOW = 200_000
GUARD = 120  # seconds: a guard against a hang only
TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}},
    ),
    ToolSpec(
        "write_file",
        "Write a file",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
    ),
)
REQUEST = CompletionRequest(
    messages=(
        ChatMessage("system", "You are terse."),
        ChatMessage("user", "Look at the README."),
        ChatMessage(
            "assistant",
            "",
            tool_calls=(ToolCallRequest("call_0", "read_file", '{"path": "README.md"}'),),
        ),
        ChatMessage("tool", "# demo project", tool_call_id="call_0"),
        ChatMessage("user", "Now summarise it."),
    ),
    tools=TOOLS,
)
_ERROR_BY_STATUS: dict[int, type[LLMError]] = {
    400: BadRequest,
    401: AuthenticationFailed,
    403: AuthenticationFailed,
    404: BadRequest,
    422: BadRequest,
    429: RateLimited,
    500: LLMError,
}


# --------------------------------------------------------------------------- harnesses


class Harness(Protocol):
    """What a contract test needs from one adapter under test."""

    model: str
    wire: str  # "scripted", "openai" or "anthropic"

    def push(self, reply: dict[str, Any]) -> None: ...

    def provider(
        self, *, timeout_s: float = 10.0, unreachable: bool = False, effort: str | None = None
    ) -> LLMProvider: ...

    async def stream_closed_early(self, timeout: float) -> bool: ...


def scripted_events(reply: dict[str, Any], model: str) -> list[LLMEvent | LLMError]:
    """The reference meaning of a fake-server reply, as port events."""
    if status := reply.get("status"):
        quota = reply.get("error_code") == "insufficient_quota"
        said = reply.get("error_message", "")
        context = reply.get("error_code") == "context_length_exceeded" or provider_words.says_too_long(said)
        err = QuotaExceeded if quota else _ERROR_BY_STATUS.get(int(status), LLMError)
        err = ContextWindowExceeded if context else err
        hint = retry_hints.from_headers(reply.get("headers", {}))
        hint = hint if hint is not None else retry_hints.from_message(said)
        return [err(f"{model} failed (HTTP {status}): {said}", status=int(status), retry_after=hint)]
    items: list[LLMEvent | LLMError] = []
    items += [ThoughtDelta(p) for p in text_pieces(reply.get("thought", ""), None)]
    items += [TextDelta(p) for p in text_pieces(reply.get("text", ""), reply.get("chunks"))]
    if "stall_after" in reply:
        deltas = items[: int(reply["stall_after"])]
        return [*deltas, ProviderTimeout(f"Timed out waiting for {model} (HTTP 408)", status=408)]
    if "error_after" in reply:
        deltas = items[: int(reply["error_after"])]
        message = reply.get("error_message", "Overloaded (fake).")
        return [*deltas, LLMError(f"Provider error from {model} (HTTP 500): {message}", status=500)]
    for i, call in enumerate(reply.get("tool_calls", [])):
        request = ToolCallRequest(f"call_{i}", call["name"], json.dumps(call["arguments"]))
        items.append(ToolCallReady(request))
    usage = reply.get("usage", {})
    items.append(Usage(usage.get("input_tokens", 10), usage.get("output_tokens", 1), CONTEXT_WINDOW))
    finish = reply.get("finish") or ("tool_calls" if reply.get("tool_calls") else "stop")
    if finish == "stop" and reply.get("tool_calls"):
        finish = "tool_calls"
    items.append(Finished(FinishReason(finish)))
    return items


class ScriptedHarness:
    model = "scripted/fake"
    wire = "scripted"

    def __init__(self) -> None:
        self.scripted = ScriptedProvider()
        self._delay = 0.0

    def push(self, reply: dict[str, Any]) -> None:
        self._delay = float(reply.get("chunk_delay", 0.0))
        self.scripted.push(scripted_events(reply, self.model))

    def provider(self, *, timeout_s: float = 10.0, unreachable: bool = False, effort: str | None = None) -> LLMProvider:
        if unreachable:
            return ScriptedProvider([ProviderUnreachable(f"Cannot reach {self.model}")])
        self.scripted.delay = self._delay
        return self.scripted

    async def stream_closed_early(self, timeout: float) -> bool:
        return self.scripted.aborted_streams == 1


class HTTPHarness:
    """An HTTP adapter (litellm or native) talking one wire protocol to the shared fake server."""

    def __init__(self, server: FakeLLMServer, wire: str, *, native: bool) -> None:
        self.server, self.wire, self.native = server, wire, native
        self.model = "openai/fake-gpt" if wire == "openai" else "anthropic/fake-claude"
        # litellm passes an effort on only for models its catalog says reason
        self.reasoning_model = "openai/gpt-5" if wire == "openai" else "anthropic/claude-sonnet-4-5"
        self.api_base = server.base_url + "/v1" if wire == "openai" else server.base_url

    def push(self, reply: dict[str, Any]) -> None:
        self.server.push(reply)

    def provider(self, *, timeout_s: float = 10.0, unreachable: bool = False, effort: str | None = None) -> LLMProvider:
        base = self.api_base
        if unreachable:
            base = base.replace(str(self.server.port), str(closed_port()))
        settings = ProviderSettings(
            model=self.reasoning_model if effort else self.model,
            api_base=base,
            api_key="sk-contract",
            timeout_s=timeout_s,
            context_window=CONTEXT_WINDOW,
            effort=effort,
            supports_reasoning=effort is not None,
        )
        if not self.native:
            return LiteLLMProvider(settings)
        return OpenAIChatProvider(settings) if self.wire == "openai" else AnthropicMessagesProvider(settings)

    def body(self, index: int = -1) -> dict[str, Any]:
        body = self.server.requests[index].body
        assert isinstance(body, dict)
        return body

    async def stream_closed_early(self, timeout: float) -> bool:
        rec = await anyio.to_thread.run_sync(lambda: self.server.wait_until_closed(timeout=timeout))
        return rec is not None and rec.status == "disconnected"


HARNESSES = ["scripted", "litellm-openai", "litellm-anthropic", "native-openai", "native-anthropic"]


@pytest.fixture(params=HARNESSES)
def harness(request: pytest.FixtureRequest) -> Harness:
    if request.param == "scripted":
        return ScriptedHarness()
    llm_server: FakeLLMServer = request.getfixturevalue("llm_server")
    llm_server.state.reset()
    kind, wire = str(request.param).split("-")
    return HTTPHarness(llm_server, wire, native=kind == "native")


def http_only(harness: Harness, why: str) -> HTTPHarness:
    """The case checks what reaches the wire or the clock; the scripted provider has neither."""
    if not isinstance(harness, HTTPHarness):
        pytest.skip(f"scripted provider: {why}")
    return harness


@asynccontextmanager
async def opened(harness: Harness, **kwargs: Any) -> AsyncIterator[LLMProvider]:
    provider = harness.provider(**kwargs)
    try:
        yield provider
    finally:
        await provider.aclose()


async def collect(harness: Harness, reply: dict[str, Any], **kwargs: Any) -> list[LLMEvent]:
    harness.push(reply)
    async with opened(harness, **kwargs) as provider:
        return [event async for event in provider.stream(REQUEST)]


def _requests(harness: Harness) -> int | None:
    """How many requests the fake server has had (None for the scripted provider, which has no server)."""
    return len(harness.server.requests) if isinstance(harness, HTTPHarness) else None


def _one_more(harness: Harness, before: int | None) -> bool:
    """One request since `before`: the adapter did not retry behind the caller's back."""
    return before is None or _requests(harness) == before + 1


def _of(events: list[LLMEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def _assert_one_finished_last(events: list[LLMEvent]) -> FinishReason:
    assert len(_of(events, Finished)) == 1, events
    assert isinstance(events[-1], Finished), events
    return events[-1].reason


# --------------------------------------------------------------------------- streaming


async def test_text_streams_in_order(harness: Harness) -> None:
    events = await collect(harness, {"text": "Hello world", "chunks": 3})
    assert [e.text for e in _of(events, TextDelta)] == ["Hell", "o wo", "rld"]
    assert _assert_one_finished_last(events) is FinishReason.STOP
    assert not _of(events, ToolCallReady)


async def test_thoughts_arrive_before_text(harness: Harness) -> None:
    events = await collect(harness, {"thought": "Let me think.", "text": "Done."})
    kinds = [type(e) for e in events if isinstance(e, (ThoughtDelta, TextDelta))]
    assert "".join(e.text for e in _of(events, ThoughtDelta)) == "Let me think."
    assert "".join(e.text for e in _of(events, TextDelta)) == "Done."
    assert kinds.index(TextDelta) > kinds.index(ThoughtDelta)
    assert _assert_one_finished_last(events) is FinishReason.STOP


async def test_parallel_tool_calls_are_reassembled(harness: Harness) -> None:
    calls = [
        {"name": "read_file", "arguments": {"path": "README.md"}},
        {"name": "write_file", "arguments": {"path": "notes.txt", "content": 'a "quoted" line\n'}},
    ]
    events = await collect(harness, {"text": "Checking.", "tool_calls": calls, "arg_chunks": 4})
    ready = [e.call for e in _of(events, ToolCallReady)]
    assert [(c.name, json.loads(c.arguments)) for c in ready] == [(c["name"], c["arguments"]) for c in calls]
    assert all(c.call_id for c in ready) and len({c.call_id for c in ready}) == 2
    assert _assert_one_finished_last(events) is FinishReason.TOOL_CALLS
    last_ready = max(i for i, e in enumerate(events) if isinstance(e, ToolCallReady))
    assert all(not isinstance(e, TextDelta) for e in events[last_ready:])


def _encodable(value: Any) -> None:
    """Every str in a port event (a dataclass, maybe nested) encodes as UTF-8."""
    if isinstance(value, str):
        value.encode("utf-8")
    elif dataclasses.is_dataclass(value):
        for item in dataclasses.fields(value):
            _encodable(getattr(value, item.name))
    elif isinstance(value, (tuple, list)):
        for item in value:
            _encodable(item)


async def test_lone_surrogates_a_provider_escapes_arrive_mended(harness: Harness) -> None:
    """JSON lets a provider send `"\\udc00"`; decoded, that is text no store or client can encode, and it
    failed the turn. Each adapter hands over U+FFFD instead, in text, thoughts and a call's arguments (where
    the wire escapes it once, as a JSON-escaping server cutting a pair would), and keeps a valid pair whole."""
    http_only(harness, "no wire, so no JSON to decode")
    reply = {
        "thought": "hmm \ud800",
        "text": "a\udc00 b \ud83d\ude00 c\ud800",
        "tool_calls": [{"name": "read_file", "arguments": '{"path": "a\udc00.txt"}'}],
    }
    events = await collect(harness, reply)
    assert "".join(e.text for e in _of(events, TextDelta)) == "a\ufffd b \U0001f600 c\ufffd"
    assert "".join(e.text for e in _of(events, ThoughtDelta)) == "hmm \ufffd"
    [ready] = _of(events, ToolCallReady)
    assert json.loads(ready.call.arguments) == {"path": "a\ufffd.txt"}
    for event in events:
        _encodable(event)  # nothing UTF-8 cannot carry
    assert _assert_one_finished_last(events) is FinishReason.TOOL_CALLS


async def test_a_pair_a_provider_splits_across_two_events_is_joined(harness: Harness) -> None:
    """A server cutting text by UTF-16 units sends `"ab\\ud83d"` then `"\\ude00cd"`: each event holds a lone
    half, and the two are joined into 😀 (in text and in a call's argument fragments), not two U+FFFD."""
    http_only(harness, "no wire, so no JSON to decode")
    split = "ab\ud83d\ude00cd"  # two code points for one character: the halves land in different events
    reply = {
        "text": split,
        "chunks": 2,
        "tool_calls": [{"name": "read_file", "arguments": '{"path": "' + split + '"}'}],
        "arg_chunks": 2,
    }
    events = await collect(harness, reply)
    texts = [e.text for e in _of(events, TextDelta)]
    assert "".join(texts) == "ab\U0001f600cd", texts
    [ready] = _of(events, ToolCallReady)
    assert json.loads(ready.call.arguments) == {"path": "ab\U0001f600cd"}
    assert _assert_one_finished_last(events) is FinishReason.TOOL_CALLS


async def test_tool_calls_with_finish_stop_report_tool_calls(harness: Harness) -> None:
    reply = {"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}], "finish": "stop"}
    events = await collect(harness, reply)
    assert len(_of(events, ToolCallReady)) == 1
    assert _assert_one_finished_last(events) is FinishReason.TOOL_CALLS


async def test_usage_is_reported_with_context_window(harness: Harness) -> None:
    events = await collect(harness, {"text": "Hi", "usage": {"input_tokens": 42, "output_tokens": 7}})
    usage = _of(events, Usage)
    assert usage == [Usage(42, 7, CONTEXT_WINDOW)]
    assert events.index(usage[0]) < len(events) - 1


@pytest.mark.parametrize(
    ("finish", "expected"),
    [("length", FinishReason.LENGTH), ("content_filter", FinishReason.CONTENT_FILTER)],
)
async def test_finish_reasons(harness: Harness, finish: str, expected: FinishReason) -> None:
    events = await collect(harness, {"text": "partial", "finish": finish})
    assert _assert_one_finished_last(events) is expected


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"status": 401}, AuthenticationFailed),
        ({"status": 429}, RateLimited),
        ({"status": 500}, LLMError),
        (
            {
                "status": 400,
                "error_code": "context_length_exceeded",
                "error_message": "prompt is too long: 250000 tokens > 200000 maximum",
            },
            ContextWindowExceeded,
        ),
        (
            # A gateway or self-hosted server that says it in words only, with no code: still an overflow,
            # so the agent compacts instead of failing the turn.
            {
                "status": 400,
                "error_code": None,
                "error_type": "invalid_request_error",
                "error_message": "This model's maximum context length is 8192 tokens; your prompt has 9000.",
            },
            ContextWindowExceeded,
        ),
    ],
    ids=["401", "429", "500", "400-context", "400-context-words-only"],
)
async def test_http_errors_map_to_port_errors(
    harness: Harness, reply: dict[str, Any], expected: type[LLMError]
) -> None:
    with pytest.raises(LLMError) as caught:
        await collect(harness, reply)
    assert type(caught.value) is expected, repr(caught.value)
    message = str(caught.value)
    assert harness.model in message and f"HTTP {reply['status']}" in message, message
    assert "litellm." not in message and "Handle with" not in message, message


@pytest.mark.parametrize(
    ("reply", "expected", "transient", "retry_after"),
    [
        ({"status": 429, "headers": {"retry-after": "2"}}, RateLimited, True, 2.0),
        ({"status": 429, "headers": {"retry-after-ms": "1500", "retry-after": "9"}}, RateLimited, True, 1.5),
        ({"status": 429, "error_message": "Slow down. Please try again in 1.5s. Visit"}, RateLimited, True, 1.5),
        (QUOTA_EXCEEDED, QuotaExceeded, False, None),
        ({"status": 503, "headers": {"retry-after": "3"}}, LLMError, True, 3.0),
        ({"status": 529, "error_type": "overloaded_error", "error_message": "Overloaded"}, LLMError, True, None),
        ({"status": 401}, AuthenticationFailed, False, None),
        (
            {"status": 400, "error_code": "context_length_exceeded", "error_message": "prompt is too long: 9 > 8"},
            ContextWindowExceeded,
            False,
            None,
        ),
    ],
    ids=["429-retry-after", "429-retry-after-ms", "429-try-again-in", "429-quota", "503", "529", "401", "400-context"],
)
async def test_errors_carry_what_the_retry_policy_reads(
    harness: Harness, reply: dict[str, Any], expected: type[LLMError], transient: bool, retry_after: float | None
) -> None:
    """Status, the provider's wait hint and whether waiting helps: the same answers from every adapter."""
    with pytest.raises(LLMError) as caught:
        await collect(harness, reply)
    error = caught.value
    assert type(error) is expected, repr(error)
    assert error.transient is transient, repr(error)
    assert error.retry_after == retry_after, repr(error)
    # Anthropic's 529 reaches litellm's Anthropic path as a 500: a server error either way.
    status = error.status
    assert status is not None and (status == reply["status"] or (reply["status"] >= 500 and status >= 500)), status


async def test_connection_refused_is_unreachable(harness: Harness) -> None:
    # No duration asserted (the first stream may pay litellm's import on a busy machine); that the adapters
    # do not retry by themselves is counted where a server can count: the timeout tests below.
    with anyio.fail_after(GUARD), pytest.raises(ProviderUnreachable) as caught:
        async with opened(harness, unreachable=True) as provider:
            [e async for e in provider.stream(REQUEST)]
    assert harness.model in str(caught.value)
    assert caught.value.transient and caught.value.status is None


async def test_stall_mid_stream_times_out(harness: Harness) -> None:
    harness.push({"text": "one two three", "stall_after": 1, "stall_seconds": 20})  # past it, the stream would end
    seen: list[LLMEvent] = []
    before = _requests(harness)
    with pytest.raises(ProviderTimeout) as caught:
        async with opened(harness, timeout_s=0.5) as provider:
            async for event in provider.stream(REQUEST):
                seen.append(event)
    assert _one_more(harness, before), "no hidden retries"
    assert [e.text for e in _of(seen, TextDelta)] == ["one "]
    assert not _of(seen, Finished)
    assert harness.model in str(caught.value)
    assert caught.value.transient  # the agent loop still refuses: a delta was already shown


async def test_error_event_mid_stream_is_a_provider_error(harness: Harness) -> None:
    harness.push({"text": "one two three", "error_after": 1, "error_message": "Overloaded now"})
    seen: list[LLMEvent] = []
    with pytest.raises(LLMError) as caught:
        async with opened(harness) as provider:
            async for event in provider.stream(REQUEST):
                seen.append(event)
    assert type(caught.value) is LLMError, repr(caught.value)
    assert harness.model in str(caught.value) and "Overloaded now" in str(caught.value)
    assert [e.text for e in _of(seen, TextDelta)] == ["one "]
    assert not _of(seen, Finished)


# --------------------------------------------------------------------------- closing


async def test_cancelling_the_consumer_closes_the_stream(harness: Harness) -> None:
    harness.push({"text": "word " * 400, "chunk_delay": 0.02})
    got_two = anyio.Event()
    seen: list[LLMEvent] = []
    async with opened(harness) as provider:

        async def consume() -> None:
            async for event in provider.stream(REQUEST):
                seen.append(event)
                if len(_of(seen, TextDelta)) == 2:
                    got_two.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            with anyio.fail_after(GUARD):
                await got_two.wait()
            tg.cancel_scope.cancel()
        assert await harness.stream_closed_early(timeout=GUARD)
    assert not _of(seen, Finished)


async def test_closing_the_iterator_closes_the_stream(harness: Harness) -> None:
    harness.push({"text": "word " * 400, "chunk_delay": 0.02})
    async with opened(harness) as provider:
        async with aclosing(provider.stream(REQUEST)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        assert await harness.stream_closed_early(timeout=GUARD)


async def test_prepare_is_idempotent_and_a_request_during_it_waits_for_it(harness: Harness) -> None:
    harness.push({"text": "ready"})
    harness.push({"text": "again"})
    async with opened(harness) as provider:
        async with anyio.create_task_group() as tg:
            tg.start_soon(provider.prepare)  # the background preparation, racing the first request
            first = [event async for event in provider.stream(REQUEST)]
        await provider.prepare()
        second = [event async for event in provider.stream(REQUEST)]
    assert [e.text for e in _of(first, TextDelta)] == ["ready"]
    assert [e.text for e in _of(second, TextDelta)] == ["again"]


async def test_aclose_is_idempotent_and_safe_before_use(harness: Harness) -> None:
    provider = harness.provider()
    await provider.aclose()
    await provider.aclose()


# --------------------------------------------------------------------------- request shape


async def test_request_reaches_the_model_intact(harness: Harness) -> None:
    """History with a tool round-trip, tools and max_tokens arrive in the wire's own shape."""
    harness.push({"text": "ok"})
    request = CompletionRequest(REQUEST.messages, REQUEST.tools, max_tokens=321)
    async with opened(harness) as provider:
        [e async for e in provider.stream(request)]
    if isinstance(harness, ScriptedHarness):
        assert harness.scripted.requests == [request]
        return
    assert isinstance(harness, HTTPHarness)
    body = harness.body()
    assert body["stream"] is True and body["max_tokens"] == 321
    wire = json.dumps(body)
    assert "Now summarise it." in wire and "# demo project" in wire
    if harness.wire == "openai":
        msgs = body["messages"]
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "user"]
        assert msgs[2]["tool_calls"][0]["function"] == {"name": "read_file", "arguments": '{"path": "README.md"}'}
        assert msgs[3]["tool_call_id"] == "call_0"
        assert [t["function"]["name"] for t in body["tools"]] == ["read_file", "write_file"]
        assert body["stream_options"] == {"include_usage": True}
        assert body["model"] == "fake-gpt"
    else:
        assert "You are terse." in json.dumps(body["system"])
        blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        tool_use = next(b for b in blocks if b["type"] == "tool_use")
        tool_result = next(b for b in blocks if b["type"] == "tool_result")
        assert (tool_use["id"], tool_use["name"], tool_use["input"]) == ("call_0", "read_file", {"path": "README.md"})
        assert tool_result["tool_use_id"] == "call_0"
        assert [t["name"] for t in body["tools"]] == ["read_file", "write_file"]
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert body["model"] == "fake-claude"
    headers = harness.server.requests[-1].headers
    if harness.wire == "openai":
        assert headers.get("authorization") == "Bearer sk-contract"
    else:
        assert headers.get("x-api-key") == "sk-contract" and headers.get("anthropic-version") == "2023-06-01"


def _reasoning_providers() -> list[str]:
    return [h for h in HARNESSES if h != "scripted"]


@pytest.mark.parametrize("supports_reasoning", [True, False])
@pytest.mark.parametrize("adapter", _reasoning_providers())
async def test_effort_is_sent_only_to_reasoning_models(
    llm_server: FakeLLMServer, adapter: str, supports_reasoning: bool
) -> None:
    llm_server.state.reset()
    kind, wire = adapter.split("-")
    harness = HTTPHarness(llm_server, wire, native=kind == "native")
    harness.push({"text": "ok"})
    request = CompletionRequest((ChatMessage("user", "hi"),), max_tokens=20000)
    async with opened(harness, effort="low" if supports_reasoning else None) as provider:
        [e async for e in provider.stream(request)]
    body = harness.body()
    if wire == "openai":
        assert body.get("reasoning_effort") == ("low" if supports_reasoning else None)
        if kind == "native":  # OpenAI's reasoning models take only max_completion_tokens
            key = "max_completion_tokens" if supports_reasoning else "max_tokens"
            assert body[key] == 20000
    elif supports_reasoning:
        thinking = body.get("thinking")
        assert isinstance(thinking, dict) and thinking["type"] == "enabled", body
        assert 1024 <= thinking["budget_tokens"] < body["max_tokens"]
    else:
        assert body.get("thinking") in (None, {"type": "disabled"})


# --------------------------------------------------------------------------- native specifics


async def test_first_byte_timeout(harness: Harness) -> None:
    http_only(harness, "no clock and no wire: it cannot wait for a first byte")
    harness.push({"text": "late", "delay_first_byte": 8})  # the text would come after 8 s: the timeout came first
    seen: list[LLMEvent] = []
    before = _requests(harness)
    with pytest.raises(ProviderTimeout) as caught:
        async with opened(harness, timeout_s=0.5) as provider:
            async for event in provider.stream(REQUEST):
                seen.append(event)
    assert _one_more(harness, before), "no hidden retries"
    assert not seen
    assert harness.model in str(caught.value) and caught.value.transient


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"status": 403}, AuthenticationFailed),
        ({"status": 404}, BadRequest),
        ({"status": 422}, BadRequest),
        ({"status": 400, "error_message": "Invalid value for 'tools'."}, BadRequest),
        (QUOTA_EXCEEDED, QuotaExceeded),
        ({"status": 503}, LLMError),
    ],
    ids=["403", "404", "422", "400-plain", "429-quota", "503"],
)
async def test_every_error_class(harness: Harness, reply: dict[str, Any], expected: type[LLMError]) -> None:
    if isinstance(harness, HTTPHarness) and not harness.native and harness.wire == "openai" and reply["status"] == 403:
        pytest.skip("litellm raises a bare APIError for OpenAI's 403, which litellm_errors maps to LLMError")
    with pytest.raises(LLMError) as caught:
        await collect(harness, reply)
    assert type(caught.value) is expected, repr(caught.value)
    assert caught.value.status == reply["status"], repr(caught.value)
    assert harness.model in str(caught.value) and f"HTTP {reply['status']}" in str(caught.value)


async def test_error_event_before_any_delta_is_transient(harness: Harness) -> None:
    """An overloaded server that fails in-stream before saying anything may be retried (a 5xx, or 529)."""
    harness.push({"text": "one two", "error_after": 0, "error_message": "Overloaded"})
    seen: list[LLMEvent] = []
    with pytest.raises(LLMError) as caught:
        async with opened(harness) as provider:
            async for event in provider.stream(REQUEST):
                seen.append(event)
    assert not _of(seen, TextDelta)
    if isinstance(harness, HTTPHarness) and not harness.native and harness.wire == "openai":
        pytest.skip("litellm reports OpenAI in-stream errors without a status (a bare APIConnectionError)")
    assert caught.value.transient, repr(caught.value)
    assert caught.value.status is not None and caught.value.status >= 500, repr(caught.value)


async def test_cached_and_reasoning_usage(harness: Harness) -> None:
    http = http_only(harness, "replays Usage events as given; nothing to translate")
    usage = {
        "input_tokens": 100,
        "output_tokens": 20,
        "cached_tokens": 60,
        "cache_read_input_tokens": 60,
        "cache_creation_input_tokens": 10,
        "reasoning_tokens": 5,
    }
    events = await collect(http, {"text": "Hi", "usage": usage})
    [got] = _of(events, Usage)
    if http.wire == "openai":  # prompt_tokens includes the cached part; no cache writes on this wire
        assert got == Usage(100, 20, CONTEXT_WINDOW, cached_input_tokens=60, reasoning_tokens=5)
    else:  # input_tokens is the uncached part only: the adapter adds reads and writes back in
        assert (got.input_tokens, got.output_tokens) == (170, 20)
        assert (got.cached_input_tokens, got.cache_write_tokens) == (60, 10)


async def test_thinking_blocks_become_reasoning_ready(harness: Harness) -> None:
    http = http_only(harness, "replays whatever events it is given")
    http.push({"thought": "Let me think.", "text": "Done."})
    async with opened(http, effort="low") as provider:
        events = [e async for e in provider.stream(CompletionRequest((ChatMessage("user", "Think first."),)))]
    ready = [e.block for e in _of(events, ReasoningReady)]
    if http.wire == "openai":
        assert ready == [], "Chat Completions has no signed reasoning to send back"
        return
    assert [(b.kind, b.text, b.provider) for b in ready] == [("thinking", "Let me think.", "anthropic")]
    assert ready[0].signature, "the signature is what Anthropic checks when the block comes back"
    position = events.index(next(e for e in events if isinstance(e, ReasoningReady)))
    assert all(not isinstance(e, ThoughtDelta) for e in events[position:])
    _assert_one_finished_last(events)


async def test_reasoning_blocks_go_back_first_in_the_assistant_message(harness: Harness) -> None:
    """A tool round with thinking on: the signed block from reply 1 opens the assistant turn of request 2."""
    http = http_only(harness, "has no wire to put reasoning on")
    call = {"name": "read_file", "arguments": {"path": "README.md"}}
    http.push({"thought": "I should read it.", "tool_calls": [call]})
    http.push({"text": "It is a demo."})
    first = CompletionRequest((ChatMessage("user", "Look at the README."),), TOOLS)
    async with opened(http, effort="low") as provider:
        events = [e async for e in provider.stream(first)]
        blocks = tuple(e.block for e in _of(events, ReasoningReady))
        [ready] = [e.call for e in _of(events, ToolCallReady)]
        second = CompletionRequest(
            (
                *first.messages,
                ChatMessage("assistant", "", tool_calls=(ready,), reasoning=blocks),
                ChatMessage("tool", "# demo project", tool_call_id=ready.call_id),
            ),
            TOOLS,
        )
        events = [e async for e in provider.stream(second)]
    assert "".join(e.text for e in _of(events, TextDelta)) == "It is a demo."
    body = http.body()
    wire = json.dumps(body)
    if http.wire == "openai":
        assert blocks == () and "thinking" not in wire
        return
    assert len(blocks) == 1 and blocks[0].signature
    assistant = next(m for m in body["messages"] if m["role"] == "assistant")
    kinds = [b["type"] for b in assistant["content"]]
    assert kinds[0] == "thinking" and kinds[-1] == "tool_use", kinds
    assert assistant["content"][0]["signature"] == blocks[0].signature
    assert assistant["content"][0]["thinking"] == "I should read it."


async def test_prompt_cache_key_reaches_openai_only(harness: Harness) -> None:
    request = CompletionRequest(REQUEST.messages, REQUEST.tools, cache_key="session-123")
    harness.push({"text": "ok"})
    async with opened(harness) as provider:
        [e async for e in provider.stream(request)]
    if isinstance(harness, ScriptedHarness):
        assert harness.scripted.requests[-1].cache_key == "session-123"
        return
    assert isinstance(harness, HTTPHarness)
    body = harness.body()
    if harness.wire == "openai":
        assert body.get("prompt_cache_key") == "session-123"
    else:
        assert "prompt_cache_key" not in body and "session-123" not in json.dumps(body)


def _breakpoints(value: Any) -> list[Any]:
    if isinstance(value, dict):
        own = [value] if "cache_control" in value else []
        return own + [b for v in value.values() for b in _breakpoints(v)]
    if isinstance(value, list):
        return [b for v in value for b in _breakpoints(v)]
    return []


async def test_cache_breakpoints_stay_within_four(harness: Harness) -> None:
    http = http_only(harness, "has no wire to put cache breakpoints on")
    http.push({"text": "ok"})
    async with opened(http) as provider:
        [e async for e in provider.stream(REQUEST)]
    body = http.body()
    marked = _breakpoints(body)
    if http.wire == "openai":
        assert marked == [], "OpenAI caches prefixes by itself; cache_control is Anthropic's"
        return
    assert len(marked) <= 4
    if http.native:  # last tool, last system block, and the rolling one on the last message
        assert body["tools"][-1].get("cache_control") == {"type": "ephemeral"}
        assert body["system"][-1].get("cache_control") == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1].get("cache_control") == {"type": "ephemeral"}
        assert len(marked) == 3


_NO_LITELLM_PROBE = textwrap.dedent(
    """
    import sys, anyio
    from term2.adapters.llm.anthropic_native import AnthropicMessagesProvider
    from term2.adapters.llm.openai_native import OpenAIChatProvider
    from term2.ports.llm import ChatMessage, CompletionRequest, ProviderSettings, TextDelta

    async def main(base: str) -> None:
        req = CompletionRequest((ChatMessage("user", "hi"),))
        for cls, model, api_base in (
            (OpenAIChatProvider, "openai/fake-gpt", base + "/v1"),
            (AnthropicMessagesProvider, "anthropic/fake-claude", base),
        ):
            provider = cls(ProviderSettings(model, api_base=api_base, api_key="k"))
            text = "".join([e.text async for e in provider.stream(req) if isinstance(e, TextDelta)])
            assert text == "echo: hi", text
            await provider.aclose()
        print("litellm" in sys.modules)

    anyio.run(main, sys.argv[1])
    """
)


def test_native_adapters_never_import_litellm(llm_server: FakeLLMServer) -> None:
    """Importing and streaming through both native adapters leaves litellm (4 s, 190 MB) unloaded."""
    llm_server.state.reset()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", _NO_LITELLM_PROBE, llm_server.base_url],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "False", done.stdout + done.stderr[-3000:]


# --------------------------------------------------------------------------- stdout


_STDOUT_PROBE = textwrap.dedent(
    """
    import logging, sys, anyio
    logging.basicConfig(level=logging.DEBUG)  # a host app turning DEBUG on must not leak
    from term2.adapters.llm.litellm_provider import LiteLLMProvider
    from term2.ports.llm import ChatMessage, CompletionRequest, LLMError, ProviderSettings

    async def main(base: str) -> None:
        req = CompletionRequest((ChatMessage("user", "hi"),))
        kinds = []
        for model, api_base in (("openai/fake-401", base + "/v1"), ("nosuchprovider/x", None)):
            provider = LiteLLMProvider(ProviderSettings(model, api_base=api_base, api_key="k"))
            try:
                async for _ in provider.stream(req):
                    pass
            except LLMError as err:
                kinds.append(type(err).__name__)
            await provider.aclose()
        sys.stderr.write("PROBE " + " ".join(kinds) + "\\n")

    anyio.run(main, sys.argv[1])
    """
)


@dataclass
class _Probe:
    proc: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path


@pytest.fixture(scope="module")
def stdout_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Probe]:
    """Start the stdout probe early so its slow litellm import overlaps the suite."""
    out_dir = tmp_path_factory.mktemp("stdout-probe")
    env = dict(os.environ)
    # Bytecode for litellm's ~3k modules, kept under the temp dir (never in the tree):
    # with PYTHONDONTWRITEBYTECODE every run recompiles them, which dominates this test.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "term2-test-pycache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    with start_fake_llm() as server:  # its own server: no race with the shared request log
        with (out_dir / "out").open("wb") as out, (out_dir / "err").open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", _STDOUT_PROBE, server.base_url],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
            )
        try:
            yield _Probe(proc, out_dir / "out", out_dir / "err")
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def llm_server(stdout_probe: _Probe) -> Iterator[FakeLLMServer]:
    """Shared fake server; also starts the stdout probe so its import overlaps these tests."""
    del stdout_probe
    with start_fake_llm() as server:
        yield server


def test_litellm_never_writes_to_stdout(stdout_probe: _Probe) -> None:
    """Fresh interpreter, root logger at DEBUG, a 401 and an unknown provider: fd 1 stays empty."""
    returncode = stdout_probe.proc.wait(timeout=150)
    stderr = stdout_probe.stderr.read_text(errors="replace")
    assert returncode == 0, stderr[-3000:]
    assert "PROBE AuthenticationFailed BadRequest" in stderr, stderr[-3000:]
    assert stdout_probe.stdout.read_bytes() == b""


# --------------------------------------------------------------------------- a llama.cpp-like server


@pytest.fixture(scope="module")
def llama_server() -> Iterator[FakeLLMServer]:
    """The fake in its llama.cpp-like mode (llama-cpp-python's answers), a 1,000-token context."""
    with start_fake_llm(llama_cpp=LlamaSettings(n_ctx=1_000, tool_format="streamed")) as server:
        yield server


@pytest.fixture(params=["native-openai", "litellm-openai"])
def on_llama(request: pytest.FixtureRequest, llama_server: FakeLLMServer) -> HTTPHarness:
    llama_server.state.reset()
    return HTTPHarness(llama_server, "openai", native=str(request.param).startswith("native"))


def _with_options(harness: HTTPHarness, options: RequestOptions) -> LLMProvider:
    settings = ProviderSettings(
        model=harness.model, api_base=harness.api_base, api_key="sk-contract", request_options=options
    )
    return LiteLLMProvider(settings) if not harness.native else OpenAIChatProvider(settings)


async def test_llama_cpp_like_takes_a_tool_loop_and_streams_no_usage(on_llama: HTTPHarness) -> None:
    """The tool-call turn goes out with `"content": ""` (null is a 500 there); no usage comes back."""
    events = await collect(on_llama, {"text": "It is a demo.", "chunks": 2})
    assert "".join(e.text for e in _of(events, TextDelta)) == "It is a demo."
    if on_llama.native:  # litellm counts a stream without usage itself (a limitation: docs/configuration.md)
        assert _of(events, Usage) == []
    assert _assert_one_finished_last(events) is FinishReason.STOP
    [assistant] = [m for m in on_llama.body()["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == ""


async def test_llama_cpp_like_validation_500_names_its_field_and_allows_one_retry(on_llama: HTTPHarness) -> None:
    provider = _with_options(on_llama, RequestOptions(extra_body=(("temperature", "hot"),)))
    try:
        with pytest.raises(LLMError) as caught:
            async for _ in provider.stream(REQUEST):
                pass
    finally:
        await provider.aclose()
    error = caught.value
    assert on_llama.body()["temperature"] == "hot"
    assert error.status == 500 and error.transient
    if on_llama.native:  # litellm keeps only the head of the body: the field is the native wire's
        assert error.retry_limit == 1
        assert "temperature: Input should be a valid number" in str(error), str(error)


async def test_llama_cpp_like_overflow_is_an_empty_stream_not_an_answer(on_llama: HTTPHarness) -> None:
    long = CompletionRequest((ChatMessage("user", "word " * 2_000),))
    async with opened(on_llama) as provider:
        with pytest.raises(IncompleteResponse) as caught:
            async for _ in provider.stream(long):
                pass
    assert caught.value.empty
    assert "empty event stream" in str(on_llama.server.requests[-1].rejection)


async def test_llama_cpp_like_ends_an_endless_answer_at_max_tokens(on_llama: HTTPHarness) -> None:
    on_llama.push({"endless": True})
    bounded = CompletionRequest((ChatMessage("user", "count"),), max_tokens=12)
    async with opened(on_llama) as provider:
        events = [event async for event in provider.stream(bounded)]
    assert len(_of(events, TextDelta)) == 12
    assert _assert_one_finished_last(events) is FinishReason.LENGTH
    assert on_llama.body()["max_tokens"] == 12


async def test_request_options_reach_the_wire(on_llama: HTTPHarness) -> None:
    options = RequestOptions(tool_choice="auto", stream_usage=False, extra_body=(("cache_prompt", True),))
    on_llama.push({"text": "ok"})
    provider = _with_options(on_llama, options)
    try:
        [_ async for _ in provider.stream(REQUEST)]
    finally:
        await provider.aclose()
    body = on_llama.body()
    assert body["tool_choice"] == "auto" and body["cache_prompt"] is True and "stream_options" not in body
