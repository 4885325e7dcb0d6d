"""Anthropic Messages stream events folded into the LLM port's events (the request body: `anthropic_wire`).

Pure, like the request side, so the stream's rules can be unit-tested without a server: thinking
blocks come back signed and whole, tool calls are released at the end in block order, and the
reported input tokens add the cache's reads and writes back in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from term2.adapters.llm.chat_shapes import finish_reason
from term2.adapters.llm.http_errors import error_from_event
from term2.adapters.llm.sse import SSEEvent, event_json
from term2.ports.llm import (
    Finished,
    LLMEvent,
    ReasoningBlock,
    ReasoningReady,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    ToolCallRequest,
    Usage,
)

_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


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
