"""OpenAI Chat Completions shapes: the port's messages and tools as its dicts, its chunks back as port events.

litellm speaks these shapes for every provider, and the native OpenAI wire
(`openai_wire`) sends them as they are, so both adapters use this one module;
it imports no litellm. Kept apart from the providers so it can be unit-tested
without a server, and so each streaming generator stays short enough to audit
for the one thing that matters most there: the HTTP stream is always closed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from term2.domain.images import Image
from term2.domain.turn import FinishReason
from term2.ports.llm import (
    ChatMessage,
    ReasoningBlock,
    ReasoningReady,
    ToolCallReady,
    ToolCallRequest,
    ToolSpec,
    Usage,
)

_FINISH = {
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def message_to_openai(message: ChatMessage, *, thinking_blocks: bool = False) -> dict[str, Any]:
    """One port message as an OpenAI chat message (litellm converts it for other providers).

    With ``thinking_blocks``, an assistant message's Anthropic reasoning goes along
    as litellm's ``thinking_blocks`` field, which litellm's Anthropic path puts first
    in the assistant content (a tool loop with thinking on requires them back,
    signed). Off by default: OpenAI itself knows no such field. Content is never
    ``null``, not even beside tool calls: some compatible servers refuse it
    (the rule and the servers are in `openai_wire`'s docstring).
    """
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.images and message.role == "user":
        out["content"] = user_parts(message)
    if thinking_blocks and message.role == "assistant":
        blocks = [thinking_block(b) for b in message.reasoning if b.provider == "anthropic"]
        if blocks:
            out["thinking_blocks"] = blocks
    if message.role == "assistant" and message.tool_calls:
        out["content"] = message.content  # never null: see openai_wire's rule
        out["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id or ""
    return out


TOOL_IMAGES_NOTE = "[term2: the images returned by the tool calls above, in order]"


def openai_messages(messages: Iterable[ChatMessage], *, thinking_blocks: bool = False) -> list[dict[str, Any]]:
    """The port's messages as OpenAI chat messages, a tool result's images included.

    A `tool` message takes text only, and nothing may come between an assistant's
    tool calls and their results; so the images of a group of results follow it
    as one user message (term2's note, then the images in order), which every
    OpenAI-compatible server and litellm take.
    """
    out: list[dict[str, Any]] = []
    waiting: list[Image] = []
    for message in messages:
        if message.role != "tool" and waiting:
            out.append(message_to_openai(ChatMessage("user", TOOL_IMAGES_NOTE, images=tuple(waiting))))
            waiting = []
        out.append(message_to_openai(message, thinking_blocks=thinking_blocks))
        if message.role == "tool":
            waiting.extend(message.images)
    if waiting:
        out.append(message_to_openai(ChatMessage("user", TOOL_IMAGES_NOTE, images=tuple(waiting))))
    return out


def user_parts(message: ChatMessage) -> list[dict[str, Any]]:
    """A user message with images as OpenAI's content parts: its text, then each image as a data URL
    (litellm reads the same parts and converts them for every provider it routes)."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    for image in message.images:
        parts.append({"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"}})
    return parts


def thinking_block(block: ReasoningBlock) -> dict[str, Any]:
    """An Anthropic thinking (or redacted thinking) block as both its API and litellm take it back."""
    if block.kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.text}
    return {"type": "thinking", "thinking": block.text, "signature": block.signature or ""}


def tool_to_openai(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def finish_reason(raw: str | None, saw_tool_calls: bool) -> FinishReason:
    """Map a provider finish reason; unknown means stop, and stop with calls means tool_calls."""
    reason = _FINISH.get(raw or "stop", FinishReason.STOP)
    if saw_tool_calls and reason is FinishReason.STOP:
        return FinishReason.TOOL_CALLS
    return reason


def field_of(obj: Any, name: str) -> Any:
    """Read a field from a litellm pydantic object or a plain dict alike."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class ToolCallAssembler:
    """Reassembles streamed tool-call fragments, keyed by their `index`.

    Only the first fragment of a call carries its id and name; later ones carry
    argument text only, so everything is accumulated and released at the end.
    """

    _calls: dict[int, _PartialCall] = field(default_factory=dict)

    def add(self, fragment: Any) -> None:
        index = field_of(fragment, "index")
        key = index if isinstance(index, int) else len(self._calls)
        call = self._calls.setdefault(key, _PartialCall())
        call_id = field_of(fragment, "id")
        if call_id:
            call.call_id = str(call_id)
        function = field_of(fragment, "function")
        if function is not None:
            name = field_of(function, "name")
            if name:
                call.name = str(name)
            args = field_of(function, "arguments")
            if args:
                call.arguments.append(str(args))

    def __bool__(self) -> bool:
        return bool(self._calls)

    def ready(self) -> list[ToolCallReady]:
        out = []
        for key in sorted(self._calls):
            call = self._calls[key]
            call_id = call.call_id or f"call_{key}"
            request = ToolCallRequest(call_id=call_id, name=call.name, arguments="".join(call.arguments))
            out.append(ToolCallReady(request))
        return out


def _count(obj: Any, name: str) -> int:
    value = field_of(obj, name) if obj is not None else None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def usage_from(usage: Any, context_window: int | None) -> Usage | None:
    """The port's Usage from an OpenAI-shaped usage object (litellm's or the raw JSON), or None if absent.

    Cached input is ``prompt_tokens_details.cached_tokens`` (OpenAI) or
    litellm's ``cache_read_input_tokens`` (Anthropic, whose ``prompt_tokens``
    litellm already reports with the cache reads and writes added in).
    """
    if usage is None:
        return None
    prompt = field_of(usage, "prompt_tokens")
    completion = field_of(usage, "completion_tokens")
    if prompt is None and completion is None:
        return None
    cached = _count(field_of(usage, "prompt_tokens_details"), "cached_tokens") or _count(
        usage, "cache_read_input_tokens"
    )
    return Usage(
        input_tokens=int(prompt or 0),
        output_tokens=int(completion or 0),
        context_window=context_window,
        cached_input_tokens=cached,
        cache_write_tokens=_count(usage, "cache_creation_input_tokens"),
        reasoning_tokens=_count(field_of(usage, "completion_tokens_details"), "reasoning_tokens"),
    )


@dataclass
class _PartialReasoning:
    kind: str = "thinking"
    text: list[str] = field(default_factory=list)
    signature: str = ""


@dataclass
class ReasoningAssembler:
    """Rebuilds Anthropic thinking blocks from litellm's streamed ``delta.thinking_blocks``.

    litellm sends each thinking delta as a one-element list (text so far: the
    delta only), then the block's signature as a separate entry with empty
    text, keyed by the block's ``index``; a redacted block arrives whole. Only
    signed thinking and redacted blocks are kept: an unsigned block cannot be
    sent back to Anthropic.
    """

    _blocks: dict[int, _PartialReasoning] = field(default_factory=dict)

    def add(self, block: Any) -> None:
        index = field_of(block, "index")
        key = index if isinstance(index, int) else max(self._blocks, default=0)
        part = self._blocks.setdefault(key, _PartialReasoning())
        if field_of(block, "type") == "redacted_thinking":
            part.kind = "redacted_thinking"
            part.text = [str(field_of(block, "data") or "")]
            return
        text = field_of(block, "thinking")
        if text:
            part.text.append(str(text))
        signature = field_of(block, "signature")
        if signature:
            part.signature = str(signature)

    def ready(self) -> list[ReasoningReady]:
        out = []
        for key in sorted(self._blocks):
            part = self._blocks[key]
            text = "".join(part.text)
            if part.kind == "redacted_thinking" and text:
                out.append(ReasoningReady(ReasoningBlock("redacted_thinking", text)))
            elif part.kind == "thinking" and part.signature:
                out.append(ReasoningReady(ReasoningBlock("thinking", text, part.signature)))
        return out
