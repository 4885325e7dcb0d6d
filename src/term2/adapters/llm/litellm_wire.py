"""Pure translations between the port's types and litellm's OpenAI-shaped dicts and chunks.

Kept apart from the provider so they can be unit-tested without importing
litellm, and so the streaming generator stays short enough to audit for the
one thing that matters most there: the HTTP stream is always closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from term2.domain.turn import FinishReason
from term2.ports.llm import ChatMessage, ToolCallReady, ToolCallRequest, ToolSpec

_FINISH = {
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def message_to_openai(message: ChatMessage) -> dict[str, Any]:
    """One port message as an OpenAI chat message (litellm converts it for other providers)."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["content"] = message.content or None
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


def usage_counts(usage: Any) -> tuple[int, int] | None:
    """(input, output) tokens from a litellm usage object, or None if absent."""
    if usage is None:
        return None
    prompt = field_of(usage, "prompt_tokens")
    completion = field_of(usage, "completion_tokens")
    if prompt is None and completion is None:
        return None
    return int(prompt or 0), int(completion or 0)
