"""Calibrate the fake LLM server against the official `openai` and `anthropic` clients.

The fake is the specification of each provider for every other test: if the
official clients did not parse what it sends (or did not raise their own error
classes for its error bodies), tests passing against it would prove nothing.
These tests drive it with the real clients: streamed text, tool calls, usage and
the simulated prompt cache, thinking signatures round-tripped, the rules a real
provider enforces (each answered with the client's own BadRequestError), context
limits, rate limits and overload, and the Responses and Gemini routes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.fakes.llama_cpp_like import LlamaSettings
from tests.fakes.llm_accounting import prompt_chars, tokens_of
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm

MODEL_OA = "gpt-fake"
MODEL_AN = "claude-fake"
TOOLS_OA: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
TOOLS_AN: list[Any] = [
    {
        "name": "read_file",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]
LONG = "The quick brown fox jumps over the lazy dog. " * 200  # ~9,000 chars, ~2,250 tokens


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with start_fake_llm() as fake:
        yield fake


def oa(server: FakeLLMServer, key: str = "sk-test") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=10)


def an(server: FakeLLMServer, key: str = "sk-ant-test") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0, timeout=10)


def last_rejection(server: FakeLLMServer) -> str | None:
    request = server.requests[-1]
    assert request.status == "error"
    return request.rejection


# --------------------------------------------------------------------------- OpenAI chat


def test_openai_streams_text_with_usage_priced_on_the_prompt(server: FakeLLMServer) -> None:
    server.push({"text": "Hello there world", "chunks": 3})
    messages: list[Any] = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}]
    stream = oa(server).chat.completions.create(
        model=MODEL_OA, messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello there world"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.prompt_tokens == tokens_of(prompt_chars("openai", server.requests[0].body))
    assert usage.completion_tokens == 3 and usage.total_tokens == usage.prompt_tokens + 3
    assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens == 0


def test_openai_tool_calls_are_streamed_and_answered(server: FakeLLMServer) -> None:
    server.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}, "id": "call_a"}]})
    client = oa(server)
    messages: list[Any] = [{"role": "user", "content": "Read the README"}]
    stream = client.chat.completions.create(model=MODEL_OA, messages=messages, tools=TOOLS_OA, stream=True)
    name, args, call_id, finish = "", "", "", None
    for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                call_id = call.id or call_id
                name += (call.function.name or "") if call.function else ""
                args += (call.function.arguments or "") if call.function else ""
            finish = choice.finish_reason or finish
    assert (call_id, name, json.loads(args), finish) == ("call_a", "read_file", {"path": "README.md"}, "tool_calls")
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": name, "arguments": args}}
        ]},
        {"role": "tool", "tool_call_id": "call_a", "content": "# demo"},
    ]  # fmt: skip
    reply = client.chat.completions.create(model=MODEL_OA, messages=messages, tools=TOOLS_OA)
    assert reply.choices[0].message.content == "echo tool: # demo"


def test_openai_reports_cached_tokens_for_a_repeated_prefix(server: FakeLLMServer) -> None:
    client = oa(server)
    messages: list[Any] = [{"role": "system", "content": LONG}, {"role": "user", "content": "first"}]
    first = client.chat.completions.create(model=MODEL_OA, messages=messages, prompt_cache_key="s1")
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "second"}]
    second = client.chat.completions.create(model=MODEL_OA, messages=messages, prompt_cache_key="s1")
    other = client.chat.completions.create(model=MODEL_OA, messages=messages, prompt_cache_key="s2")
    assert first.usage and second.usage and other.usage
    assert first.usage.prompt_tokens_details and first.usage.prompt_tokens_details.cached_tokens == 0
    assert second.usage.prompt_tokens_details is not None
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached is not None and cached >= 1024 and cached % 128 == 0
    assert cached <= second.usage.prompt_tokens
    assert other.usage.prompt_tokens_details and other.usage.prompt_tokens_details.cached_tokens == 0


def test_openai_reasoning_tokens_when_a_thought_was_sent(server: FakeLLMServer) -> None:
    server.push({"thought": "Let me think about it.", "text": "Done."})
    reply = oa(server).chat.completions.create(model=MODEL_OA, messages=[{"role": "user", "content": "Hi"}])
    assert reply.usage and reply.usage.completion_tokens_details
    assert reply.usage.completion_tokens_details.reasoning_tokens == 5


def test_openai_context_length_rejection_keeps_the_scripted_reply(server: FakeLLMServer) -> None:
    client = oa(server)
    server.push({"text": "fits now", "max_prompt_chars": 500})
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL_OA, messages=[{"role": "user", "content": LONG}])
    assert caught.value.status_code == 400 and caught.value.code == "context_length_exceeded"
    assert caught.value.param == "messages" and caught.value.type == "invalid_request_error"
    assert "maximum context length is 125 tokens" in caught.value.message
    assert last_rejection(server) is not None
    reply = client.chat.completions.create(model=MODEL_OA, messages=[{"role": "user", "content": "short"}])
    assert reply.choices[0].message.content == "fits now"


def test_openai_server_wide_prompt_limit_and_config_route(server: FakeLLMServer) -> None:
    answer = httpx.post(server.base_url + "/_config", json={"max_prompt_chars": 100}).json()
    assert answer == {"max_prompt_chars": 100, "require_key": None, "llama_cpp": None}
    with pytest.raises(openai.BadRequestError) as caught:
        oa(server).chat.completions.create(model=MODEL_OA, messages=[{"role": "user", "content": "x" * 200}])
    assert caught.value.code == "context_length_exceeded"
    server.configure(max_prompt_chars=None)
    oa(server).chat.completions.create(model=MODEL_OA, messages=[{"role": "user", "content": "x" * 200}])


def test_openai_rate_limit_with_retry_after(server: FakeLLMServer) -> None:
    server.push({"status": 429, "headers": {"retry-after": "2"}})
    with pytest.raises(openai.RateLimitError) as caught:
        oa(server).chat.completions.create(model=MODEL_OA, messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.status_code == 429 and caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"] == "2"


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        (
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "one"},
                {"role": "user", "content": "and?"},
            ],
            "The following tool_call_ids did not have response messages: c2",
        ),
        (
            [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "c9", "content": "orphan"}],
            "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
        ),
        ([{"role": "robot", "content": "beep"}], "Invalid value: 'robot'"),
        ([], "empty array"),
    ],
    ids=["unanswered-call", "orphan-tool", "bad-role", "no-messages"],
)  # fmt: skip
def test_openai_invalid_conversations_are_bad_requests(server: FakeLLMServer, messages: list[Any], needle: str) -> None:
    server.push({"text": "not for an invalid request"})
    with pytest.raises(openai.BadRequestError) as caught:
        oa(server).chat.completions.create(model=MODEL_OA, messages=messages, tools=TOOLS_OA)
    assert needle in caught.value.message
    assert caught.value.type == "invalid_request_error"
    assert last_rejection(server)
    assert server.state.replies, "a rejected request must not consume the scripted reply"


def test_openai_tool_shape_and_stream_options_rules(server: FakeLLMServer) -> None:
    client = oa(server)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=MODEL_OA, messages=[{"role": "user", "content": "Hi"}], tools=[{"type": "function", "function": {}}]
        )
    assert caught.value.param == "tools[0].function.name"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=MODEL_OA, messages=[{"role": "user", "content": "Hi"}], stream_options={"include_usage": True}
        )
    assert caught.value.param == "stream_options"


def test_openai_api_key_is_checked_when_required() -> None:
    with start_fake_llm(require_key="sk-right") as server:
        with pytest.raises(openai.AuthenticationError) as caught:
            oa(server, "sk-wrong-key-123").chat.completions.create(
                model=MODEL_OA, messages=[{"role": "user", "content": "Hi"}]
            )
        assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
        reply = oa(server, "sk-right").chat.completions.create(
            model=MODEL_OA, messages=[{"role": "user", "content": "Hi"}]
        )
        assert reply.choices[0].message.content == "echo: Hi"


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_streams_text_with_usage(server: FakeLLMServer) -> None:
    server.push({"text": "Hello from Claude", "chunks": 2})
    with an(server).messages.stream(
        model=MODEL_AN, max_tokens=100, system="Be terse.", messages=[{"role": "user", "content": "Hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Hello from Claude" and final.stop_reason == "end_turn"
    expected = tokens_of(prompt_chars("anthropic", server.requests[0].body))
    assert final.usage.input_tokens == expected and final.usage.output_tokens == 2
    assert final.usage.cache_read_input_tokens == 0 and final.usage.cache_creation_input_tokens == 0


def test_anthropic_tool_use_round_trip(server: FakeLLMServer) -> None:
    server.push({"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]})
    client = an(server)
    messages: list[Any] = [{"role": "user", "content": "Read a.txt"}]
    with client.messages.stream(model=MODEL_AN, max_tokens=100, tools=TOOLS_AN, messages=messages) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    use = next(b for b in final.content if b.type == "tool_use")
    assert (use.name, use.input) == ("read_file", {"path": "a.txt"})
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "contents"}]},
    ]
    reply = client.messages.create(model=MODEL_AN, max_tokens=100, tools=TOOLS_AN, messages=messages)
    assert reply.content[0].type == "text" and reply.content[0].text == "echo tool: contents"


def test_anthropic_prompt_cache_creation_then_read(server: FakeLLMServer) -> None:
    client = an(server)
    system: list[Any] = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    first = client.messages.create(
        model=MODEL_AN, max_tokens=100, system=system, messages=[{"role": "user", "content": "one"}]
    )
    second = client.messages.create(
        model=MODEL_AN, max_tokens=100, system=system, messages=[{"role": "user", "content": "two"}]
    )
    prefix = len(json.dumps({"type": "text", "text": LONG}, separators=(",", ":"))) // 4
    assert first.usage.cache_creation_input_tokens == prefix and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == prefix and second.usage.cache_creation_input_tokens == 0
    total = tokens_of(prompt_chars("anthropic", server.requests[1].body))
    assert second.usage.input_tokens == total - prefix


def test_anthropic_cache_reads_an_earlier_breakpoint_when_the_marker_moves(server: FakeLLMServer) -> None:
    """Moving the breakpoint to the newest message still reads the prefix cached before."""
    client = an(server)
    mark = {"type": "ephemeral"}
    turn1: list[Any] = [{"role": "user", "content": [{"type": "text", "text": LONG, "cache_control": mark}]}]
    client.messages.create(model=MODEL_AN, max_tokens=100, messages=turn1)
    turn2: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": LONG}]},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": [{"type": "text", "text": "more", "cache_control": mark}]},
    ]
    second = client.messages.create(model=MODEL_AN, max_tokens=100, messages=turn2)
    assert (second.usage.cache_read_input_tokens or 0) > 2000
    assert 0 < (second.usage.cache_creation_input_tokens or 0) < 50


def test_anthropic_more_than_four_cache_control_blocks(server: FakeLLMServer) -> None:
    mark = {"type": "ephemeral"}
    system: list[Any] = [{"type": "text", "text": f"rule {i}", "cache_control": mark} for i in range(3)]
    content: list[Any] = [{"type": "text", "text": f"part {i}", "cache_control": mark} for i in range(2)]
    with pytest.raises(anthropic.BadRequestError) as caught:
        an(server).messages.create(
            model=MODEL_AN, max_tokens=100, system=system, messages=[{"role": "user", "content": content}]
        )
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in caught.value.message
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": caught.value.body["error"]["message"]},  # type: ignore[index]
    }


def _thinking_turn(server: FakeLLMServer, reply: dict[str, Any]) -> tuple[list[Any], Any]:
    """One thinking-enabled streamed turn that calls a tool; the history to send back and the final message."""
    server.push(reply)
    messages: list[Any] = [{"role": "user", "content": "Read a.txt"}]
    with an(server).messages.stream(
        model=MODEL_AN,
        max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 2048},
        tools=TOOLS_AN,
        messages=messages,
    ) as stream:
        final = stream.get_final_message()
    return messages, final


THINKING = {"thought": "I should read it.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}


def _send_back(server: FakeLLMServer, messages: list[Any], assistant: list[Any], use_id: str) -> Any:
    history = [
        *messages,
        {"role": "assistant", "content": assistant},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use_id, "content": "contents"}]},
    ]
    return an(server).messages.create(
        model=MODEL_AN,
        max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 2048},
        tools=TOOLS_AN,
        messages=history,
    )


def test_anthropic_thinking_signature_round_trip_is_accepted(server: FakeLLMServer) -> None:
    messages, final = _thinking_turn(server, THINKING)
    thinking = final.content[0]
    assert thinking.type == "thinking" and thinking.thinking == "I should read it."
    assert thinking.signature.startswith("sig-0-0")
    use = next(b for b in final.content if b.type == "tool_use")
    blocks = [b.model_dump(exclude_none=True) for b in final.content]
    reply = _send_back(server, messages, blocks, use.id)
    assert reply.content[-1].type == "text" and reply.content[-1].text == "echo tool: contents"
    server.push(dict(THINKING))
    _, again = _thinking_turn(server, THINKING)
    assert again.content[0].type == "thinking" and again.content[0].signature != thinking.signature


def test_anthropic_redacted_thinking_round_trip(server: FakeLLMServer) -> None:
    messages, final = _thinking_turn(server, {**THINKING, "thought": "", "redacted": "opaque-data"})
    assert final.content[0].type == "redacted_thinking" and final.content[0].data == "opaque-data"
    use = next(b for b in final.content if b.type == "tool_use")
    _send_back(server, messages, [b.model_dump(exclude_none=True) for b in final.content], use.id)
    forged = [{"type": "redacted_thinking", "data": "forged"}, use.model_dump(exclude_none=True)]
    with pytest.raises(anthropic.BadRequestError, match="Invalid `data` in `redacted_thinking` block"):
        _send_back(server, messages, forged, use.id)


def test_anthropic_tool_loop_without_its_thinking_block_is_rejected(server: FakeLLMServer) -> None:
    messages, final = _thinking_turn(server, THINKING)
    use = next(b for b in final.content if b.type == "tool_use")
    without = [b.model_dump(exclude_none=True) for b in final.content if b.type != "thinking"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        _send_back(server, messages, without, use.id)
    assert "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`" in str(
        caught.value.message
    )
    assert "a final `assistant` message must start with a thinking block" in caught.value.message
    tampered = [b.model_dump(exclude_none=True) for b in final.content]
    tampered[0]["thinking"] = "I changed my mind."
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature` in `thinking` block"):
        _send_back(server, messages, tampered, use.id)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 512}}, "greater than or equal to 1024"),
        ({"max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 2000}}, "`max_tokens` must be greater"),
        ({"max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1"),
    ],
    ids=["small-budget", "budget-over-max", "zero-max-tokens"],
)
def test_anthropic_thinking_and_max_tokens_rules(server: FakeLLMServer, kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        an(server).messages.create(model=MODEL_AN, messages=[{"role": "user", "content": "Hi"}], **kwargs)
    assert needle in caught.value.message


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([{"role": "system", "content": "x"}, {"role": "user", "content": "Hi"}], 'Unexpected role "system"'),
        ([{"role": "assistant", "content": "Hi"}], 'first message must use the "user" role'),
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "roles must alternate"),
        (
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
                {"role": "user", "content": "what happened?"},
            ],
            "`tool_use` ids were found without `tool_result` blocks immediately after: t1",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "?"}]}],
            "unexpected `tool_use_id` found in `tool_result` blocks: t9",
        ),
        (
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "x"}],
            "all messages must have non-empty content",
        ),
        (
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "b"}]},
            ],
            "messages.3.content.0: `tool_use` ids must be unique",
        ),
    ],
    ids=[
        "system-role",
        "assistant-first",
        "not-alternating",
        "unanswered-tool-use",
        "orphan-result",
        "empty",
        "tool-use-id-reused",
    ],
)
def test_anthropic_invalid_conversations_are_bad_requests(
    server: FakeLLMServer, messages: list[Any], needle: str
) -> None:
    server.push({"text": "kept"})
    with pytest.raises(anthropic.BadRequestError) as caught:
        an(server).messages.create(model=MODEL_AN, max_tokens=100, tools=TOOLS_AN, messages=messages)
    assert needle in caught.value.message
    assert last_rejection(server) and server.state.replies


def test_anthropic_prompt_too_long(server: FakeLLMServer) -> None:
    server.configure(max_prompt_chars=400)
    with pytest.raises(anthropic.BadRequestError) as caught:
        an(server).messages.create(model=MODEL_AN, max_tokens=100, messages=[{"role": "user", "content": LONG}])
    assert "prompt is too long:" in caught.value.message and "tokens > 100 maximum" in caught.value.message


@pytest.mark.parametrize(
    ("reply", "error", "status"),
    [
        ({"status": 429, "headers": {"retry-after": "3"}}, anthropic.RateLimitError, 429),
        ({"status": 529}, anthropic.InternalServerError, 529),
        ({"status": 401}, anthropic.AuthenticationError, 401),
    ],
    ids=["429", "529", "401"],
)
def test_anthropic_error_statuses_raise_the_clients_classes(
    server: FakeLLMServer, reply: dict[str, Any], error: type[anthropic.APIStatusError], status: int
) -> None:
    server.push(reply)
    with pytest.raises(error) as caught:
        an(server).messages.create(model=MODEL_AN, max_tokens=100, messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.status_code == status
    if status == 529:
        assert isinstance(caught.value, anthropic.APIStatusError)
        assert caught.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    if status == 429:
        assert caught.value.response.headers["retry-after"] == "3"


def test_anthropic_headers_version_and_key() -> None:
    with start_fake_llm(require_key="sk-ant-right") as server:
        body = {"model": MODEL_AN, "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}
        answer = httpx.post(server.base_url + "/v1/messages", json=body, headers={"x-api-key": "sk-ant-right"})
        assert answer.status_code == 400
        assert answer.json()["error"]["message"] == "anthropic-version: header is required"
        with pytest.raises(anthropic.AuthenticationError, match="invalid x-api-key"):
            an(server, "sk-ant-wrong").messages.create(**body)
        assert an(server, "sk-ant-right").messages.create(**body).content[0].type == "text"


# --------------------------------------------------------------------------- Responses and Gemini


def test_openai_responses_stream_and_function_calls(server: FakeLLMServer) -> None:
    client = oa(server)
    server.push({"thought": "Hmm.", "text": "Hello codex", "chunks": 2})
    events = list(client.responses.create(model=MODEL_OA, input="Hi", instructions="Be terse.", stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert deltas == ["Hello ", "codex"]
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == "Hello codex"
    assert completed.response.usage is not None and completed.response.usage.output_tokens_details.reasoning_tokens
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert server.requests[0].protocol == "responses"

    server.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}, "id": "call_r"}]})
    tools: list[Any] = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]
    reply = client.responses.create(model=MODEL_OA, input="Read a", tools=tools)
    call = reply.output[0]
    assert call.type == "function_call" and (call.name, call.call_id) == ("read_file", "call_r")
    follow: list[Any] = [
        {"role": "user", "content": "Read a"},
        {"type": "function_call", "call_id": "call_r", "name": "read_file", "arguments": call.arguments},
        {"type": "function_call_output", "call_id": "call_r", "output": "file a"},
    ]
    assert client.responses.create(model=MODEL_OA, input=follow, tools=tools).output_text == "echo tool: file a"
    with pytest.raises(openai.BadRequestError, match="No tool call found"):
        client.responses.create(model=MODEL_OA, input=follow[2:], tools=tools)


def test_gemini_stream_and_function_call(server: FakeLLMServer) -> None:
    server.push({"text": "Hi gemini", "chunks": 2})
    url = server.base_url + "/v1beta/models/gemini-fake:streamGenerateContent?alt=sse"
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "Hello"}]}]}
    with httpx.stream("POST", url, json=body, headers={"x-goog-api-key": "g"}) as answer:
        assert answer.status_code == 200
        frames = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    text = "".join(p.get("text", "") for f in frames for p in f["candidates"][0]["content"]["parts"])
    assert text == "Hi gemini" and frames[-1]["candidates"][0]["finishReason"] == "STOP"
    assert frames[-1]["usageMetadata"]["candidatesTokenCount"] == 2
    rec = server.requests[0]
    assert (rec.protocol, rec.model) == ("gemini", "gemini-fake")

    server.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}]})
    url = server.base_url + "/v1beta/models/gemini-fake:generateContent"
    whole = httpx.post(url, json=body).json()
    assert whole["candidates"][0]["content"]["parts"][0]["functionCall"] == {"name": "read_file", "args": {"path": "a"}}
    orphan = {"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {}}}]}]}
    refused = httpx.post(url, json=orphan)
    assert refused.status_code == 400 and refused.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_responder_and_the_request_log(server: FakeLLMServer) -> None:
    server.responder = lambda request: {"text": f"request {request.index}"}
    server.push({"text": "queued first"})
    client = oa(server)
    said = [
        client.chat.completions.create(model=MODEL_OA, messages=[{"role": "user", "content": "Hi"}])
        .choices[0]
        .message.content
        for _ in range(2)
    ]
    assert said == ["queued first", "request 1"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL_OA, messages=[{"role": "tool", "tool_call_id": "x", "content": ""}])
    log = httpx.get(server.base_url + "/_requests").json()
    assert [entry["status"] for entry in log] == ["completed", "completed", "error"]
    assert log[-1]["rejection"] and log[0]["rejection"] is None


def test_gemini_count_tokens(server: FakeLLMServer) -> None:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "Hello"}]}]}
    answer = httpx.post(server.base_url + "/v1beta/models/gemini-fake:countTokens", json=body).json()
    assert answer == {"totalTokens": tokens_of(prompt_chars("gemini", body))}
    assert server.requests == []


# --------------------------------------------------------------------------- the llama.cpp-like mode


@pytest.fixture
def llama() -> Iterator[FakeLLMServer]:
    with start_fake_llm(llama_cpp=LlamaSettings(n_ctx=300, tool_format="streamed")) as fake:
        yield fake


TOOL_TURN: list[Any] = [
    {"role": "user", "content": "Read it."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "text"},
]


def test_llama_cpp_like_streams_to_the_openai_client_without_usage(llama: FakeLLMServer) -> None:
    llama.push({"text": "Hello there", "chunks": 2})
    stream = oa(llama).chat.completions.create(
        model="gemma", messages=[{"role": "user", "content": "Hi"}], stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there"
    assert all(c.usage is None for c in chunks)  # stream_options is ignored, silently
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_llama_cpp_like_refuses_null_content_with_pydantic_500(llama: FakeLLMServer) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        oa(llama).chat.completions.create(model="gemma", messages=TOOL_TURN)
    message = caught.value.body["message"] if isinstance(caught.value.body, dict) else ""
    assert message.startswith("7 validation errors:\n"), message
    assert "'loc': ('body', 'messages', 1, 'ChatCompletionRequestAssistantMessage', 'content')" in message
    TOOL_TURN[1]["content"] = ""
    try:
        llama.push({"text": "Read."})
        reply = oa(llama).chat.completions.create(model="gemma", messages=TOOL_TURN)
    finally:
        TOOL_TURN[1]["content"] = None
    assert reply.choices[0].message.content == "Read." and reply.usage is not None


def test_llama_cpp_like_overflow_empty_when_streamed_400_otherwise(llama: FakeLLMServer) -> None:
    long = [{"role": "user", "content": "word " * 400}]
    with httpx.stream(
        "POST", f"{llama.base_url}/v1/chat/completions", json={"model": "gemma", "messages": long, "stream": True}
    ) as response:
        assert response.status_code == 200 and response.read() == b""
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    with pytest.raises(openai.BadRequestError) as caught:
        oa(llama).chat.completions.create(model="gemma", messages=long)
    assert caught.value.code == "context_length_exceeded"
    assert "maximum context length is 300 tokens" in str(caught.value)
