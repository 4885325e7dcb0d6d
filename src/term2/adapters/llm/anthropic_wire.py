"""Pure translations for Anthropic Messages: the request body, and stream events to port events.

Kept apart from the HTTP code so the rules Anthropic enforces can be unit-tested
without a server: roles must alternate (so consecutive tool results, and a user
message after them, share one user turn, tool results first); system text is a
top-level field; an assistant turn returns its signed thinking blocks first,
unchanged; and at most 4 ``cache_control`` breakpoints are allowed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from term2.adapters.llm.chat_shapes import finish_reason, thinking_block
from term2.adapters.llm.http_errors import error_from_event
from term2.adapters.llm.sse import SSEEvent, event_json
from term2.domain.images import Image
from term2.ports.llm import (
    ChatMessage,
    CompletionRequest,
    Finished,
    LLMEvent,
    ReasoningBlock,
    ReasoningReady,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    ToolCallRequest,
    ToolSpec,
    Usage,
)

__all__ = [
    "ANSWER_ROOM",
    "DEFAULT_MAX_TOKENS",
    "MAX_BREAKPOINTS",
    "THINKING_BUDGETS",
    "AnthropicStream",
    "messages_body",
    "thinking_budget",
    "to_messages",
    "tool_input",
]

# Anthropic requires max_tokens. 8192 fits every current Claude model's output limit;
# with thinking on, the budget is added on top so the answer keeps room (ANSWER_ROOM).
DEFAULT_MAX_TOKENS = 8192
ANSWER_ROOM = 8192
MIN_BUDGET = 1024  # the smallest budget Anthropic accepts
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 10000, "high": 32000, "xhigh": 32000, "max": 32000}
_NO_THINKING = frozenset({"none", "off", "disabled", ""})
MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}
_CACHEABLE = frozenset({"text", "tool_result", "tool_use", "image", "document"})
_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


# --------------------------------------------------------------------------- request


def thinking_budget(effort: str | None) -> int | None:
    """Thinking tokens for an effort level; None for no thinking. An unknown level gets "medium"."""
    if effort is None or effort.strip().lower() in _NO_THINKING:
        return None
    return THINKING_BUDGETS.get(effort.strip().lower(), THINKING_BUDGETS["medium"])


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as the object ``tool_use.input`` must be.

    Empty arguments are ``{}``. Arguments that are not a JSON object (the model
    produced broken JSON, which the tool then refused) are kept as
    ``{"_raw_arguments": text}`` rather than dropped, so the model still sees
    what it sent when it reads the error that followed.
    """
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"_raw_arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw_arguments": arguments}


def _assistant_blocks(message: ChatMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.reasoning:
        if block.provider != "anthropic":
            continue  # another provider's reasoning is meaningless (and unverifiable) here
        blocks.append(thinking_block(block))
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.call_id, "name": call.name, "input": tool_input(call.arguments)})
    return blocks


def _blocks_of(message: ChatMessage) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "assistant":
        return "assistant", _assistant_blocks(message)
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        if message.content:
            result["content"] = message.content
        if message.images:  # a tool result takes image blocks beside its text
            text = [{"type": "text", "text": message.content}] if message.content else []
            result["content"] = text + [_image(image) for image in message.images]
        return "user", [result]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    blocks.extend(_image(image) for image in message.images)  # after the text that names them
    return "user", blocks


def _image(image: Image) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": image.data}}


def _results_first(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic wants a user turn's tool results before any text in it."""
    return [b for b in blocks if b["type"] == "tool_result"] + [b for b in blocks if b["type"] != "tool_result"]


def to_messages(messages: Iterable[ChatMessage]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, alternating user/assistant messages) for the Messages API.

    System messages, wherever they stand, become the top-level ``system``
    blocks in order. Consecutive messages that land on the same role (tool
    results, then a user message) are merged into one turn; messages with
    nothing to send (empty text) are dropped, since Anthropic refuses empty
    text blocks.
    """
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append({"type": "text", "text": message.content})
            continue
        role, blocks = _blocks_of(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            turn["content"] = _results_first(turn["content"])
    return system, turns


def tool_to_anthropic(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def _count_breakpoints(value: Any) -> int:
    if isinstance(value, dict):
        return int("cache_control" in value) + sum(_count_breakpoints(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_breakpoints(v) for v in value)
    return 0


def place_breakpoints(body: dict[str, Any]) -> None:
    """Mark the prompt-cache prefix ends: last tool, last system block, last block of the last message.

    The order matters: tools, then system, then messages is the order Anthropic
    hashes the prefix in, so the first two stay valid for a whole session while
    the third rolls forward with the conversation (Anthropic looks up to 20
    blocks back from a breakpoint for an earlier cached prefix, which covers
    the blocks one tool round adds). Never more than `MAX_BREAKPOINTS`
    overall; thinking blocks cannot carry one.
    """
    targets: list[dict[str, Any]] = []
    if body.get("tools"):
        targets.append(body["tools"][-1])
    if body.get("system"):
        targets.append(body["system"][-1])
    if body.get("messages"):
        for block in reversed(body["messages"][-1]["content"]):
            if block.get("type") in _CACHEABLE:
                targets.append(block)
                break
    budget = MAX_BREAKPOINTS - _count_breakpoints(body)
    for target in targets[: max(0, budget)]:
        target["cache_control"] = dict(_EPHEMERAL)


def _thinking_allowed(messages: tuple[ChatMessage, ...]) -> bool:
    """Inside a tool loop Anthropic wants the last assistant turn to open with its thinking block.

    When that turn has tool calls but no Anthropic reasoning (another model made
    it, or thinking was off), enabling thinking now would be refused with a 400,
    so this request goes without (litellm makes the same call).
    """
    for message in reversed(messages):
        if message.role == "assistant":
            has_reasoning = any(b.provider == "anthropic" for b in message.reasoning)
            return has_reasoning or not message.tool_calls
    return True


def messages_body(
    request: CompletionRequest, model: str, *, effort: str | None, reasoning: bool, max_output: int | None = None
) -> dict[str, Any]:
    """The JSON body of one streamed ``POST /v1/messages``, cache breakpoints placed.

    ``max_output`` is the model's own limit on a response (the catalog's): ``max_tokens`` never
    exceeds it, and thinking shrinks to leave the answer room, since a larger request is refused.
    """
    system, messages = to_messages(request.messages)
    budget = thinking_budget(effort) if reasoning and _thinking_allowed(request.messages) else None
    if budget is not None and request.max_tokens is not None and request.max_tokens <= budget:
        budget = request.max_tokens // 2  # the cap wins; thinking gets half of it
        if budget < MIN_BUDGET:
            budget = None
    if request.max_tokens is not None:
        max_tokens = request.max_tokens
    else:
        max_tokens = DEFAULT_MAX_TOKENS if budget is None else budget + ANSWER_ROOM
    if max_output is not None and max_tokens > max_output:
        max_tokens = max_output
        if budget is not None:
            budget = min(budget, max(max_tokens - ANSWER_ROOM, max_tokens // 2))
            if budget < MIN_BUDGET:
                budget = None
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages, "stream": True}
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [tool_to_anthropic(t) for t in request.tools]
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    place_breakpoints(body)
    return body


# --------------------------------------------------------------------------- stream


@dataclass
class _Block:
    kind: str
    parts: list[str] = field(default_factory=list)
    signature: str = ""
    call_id: str = ""
    name: str = ""
    start_input: Any = None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class AnthropicStream:
    """Folds Messages stream events into port events; `finish_events()` gives the closing ones.

    Text and thinking stream as deltas; a thinking block becomes one
    ``ReasoningReady`` (text plus accumulated signature) when it stops, a
    redacted one as it stops too. Tool calls are released at the end, in
    block order. ``input_tokens`` adds the cache reads and writes back in, as
    the port defines it.
    """

    model: str
    context_window: int | None = None
    blocks: dict[int, _Block] = field(default_factory=dict)
    calls: list[ToolCallRequest] = field(default_factory=list)
    stop_reason: str | None = None
    complete: bool = False
    _usage: dict[str, int] = field(default_factory=dict)

    def feed_sse(self, event: SSEEvent) -> list[LLMEvent]:
        return self.feed(event.event, event_json(event.data, self.model))

    @property
    def ended(self) -> bool:
        """``message_stop`` arrived."""
        return self.complete

    @property
    def whole(self) -> bool:
        """``message_stop``, or at least the stop reason (a server that omits ``message_stop``)."""
        return self.complete or self.stop_reason is not None

    def feed(self, name: str, payload: dict[str, Any]) -> list[LLMEvent]:
        kind = str(payload.get("type") or name)
        if kind == "error":
            raise error_from_event(payload, self.model)
        if kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                self._take_usage(message.get("usage"))
        elif kind == "content_block_start":
            return self._start(payload)
        elif kind == "content_block_delta":
            return self._delta(payload)
        elif kind == "content_block_stop":
            return self._stop(payload)
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
            self._take_usage(payload.get("usage"))
        elif kind == "message_stop":
            self.complete = True
        return []  # ping and unknown event types carry nothing for the port

    def _take_usage(self, usage: Any) -> None:
        """Counts are cumulative; a later event's value replaces the earlier one."""
        if not isinstance(usage, dict):
            return
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = _int(usage.get(key))
            if value is not None:
                self._usage[key] = value

    def _index(self, payload: dict[str, Any]) -> int:
        index = payload.get("index")
        return index if isinstance(index, int) else len(self.blocks)

    def _start(self, payload: dict[str, Any]) -> list[LLMEvent]:
        block = payload.get("content_block")
        if not isinstance(block, dict):
            return []
        kind = str(block.get("type", ""))
        state = _Block(kind)
        self.blocks[self._index(payload)] = state
        if kind == "text" and block.get("text"):
            state.parts.append(str(block["text"]))
            return [TextDelta(str(block["text"]))]
        if kind == "thinking":
            state.signature = str(block.get("signature") or "")
            if block.get("thinking"):
                state.parts.append(str(block["thinking"]))
                return [ThoughtDelta(str(block["thinking"]))]
        elif kind == "redacted_thinking":
            state.parts.append(str(block.get("data") or ""))
        elif kind == "tool_use":
            state.call_id, state.name = str(block.get("id") or ""), str(block.get("name") or "")
            state.start_input = block.get("input")
        return []

    def _delta(self, payload: dict[str, Any]) -> list[LLMEvent]:
        delta = payload.get("delta")
        state = self.blocks.get(self._index(payload))
        if not isinstance(delta, dict) or state is None:
            return []
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            state.parts.append(str(delta["text"]))
            return [TextDelta(str(delta["text"]))]
        if kind == "thinking_delta" and delta.get("thinking"):
            state.parts.append(str(delta["thinking"]))
            return [ThoughtDelta(str(delta["thinking"]))]
        if kind == "signature_delta":
            state.signature += str(delta.get("signature") or "")
        elif kind == "input_json_delta":
            state.parts.append(str(delta.get("partial_json") or ""))
        return []

    def _stop(self, payload: dict[str, Any]) -> list[LLMEvent]:
        state = self.blocks.get(self._index(payload))
        if state is None:
            return []
        text = "".join(state.parts)
        if state.kind == "thinking" and state.signature:
            return [ReasoningReady(ReasoningBlock("thinking", text, state.signature))]
        if state.kind == "redacted_thinking" and text:
            return [ReasoningReady(ReasoningBlock("redacted_thinking", text))]
        if state.kind == "tool_use":
            if not text.strip():
                text = json.dumps(state.start_input) if state.start_input else "{}"
            call_id = state.call_id or f"toolu_{len(self.calls)}"
            self.calls.append(ToolCallRequest(call_id, state.name, text))
        return []

    def usage(self) -> Usage | None:
        if not self._usage:
            return None
        read = self._usage.get("cache_read_input_tokens", 0)
        write = self._usage.get("cache_creation_input_tokens", 0)
        return Usage(
            input_tokens=self._usage.get("input_tokens", 0) + read + write,
            output_tokens=self._usage.get("output_tokens", 0),
            context_window=self.context_window,
            cached_input_tokens=read,
            cache_write_tokens=write,
        )

    def finish_events(self) -> list[LLMEvent]:
        events: list[LLMEvent] = [ToolCallReady(call) for call in self.calls]
        usage = self.usage()
        if usage is not None:
            events.append(usage)
        raw = _STOP.get(self.stop_reason or "end_turn", "stop")
        events.append(Finished(finish_reason(raw, bool(self.calls))))
        return events
