"""The model-facing transcript: messages exactly as a model saw and produced them.

The client-facing history (`history.py`) is what an editor redraws; this is
what the next request must start with. Keeping both lets a later turn show
the model its earlier tool calls and their results as real `tool_calls` and
`tool` messages (not prose), and lets a provider that signs its reasoning
(Anthropic's thinking blocks) get those blocks back verbatim, which it
requires inside a tool loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    call_id: str
    name: str
    arguments: str  # raw JSON text exactly as the model produced it


@dataclass(frozen=True, slots=True)
class ReasoningBlock:
    """A provider's reasoning item that must be returned unchanged in the assistant message.

    ``kind`` "thinking" carries the text and its ``signature``; "redacted_thinking"
    carries the provider's opaque ``data`` in ``text``. Whoever produced it
    (``provider``) is the only one that may be sent it back.
    """

    kind: Literal["thinking", "redacted_thinking"]
    text: str
    signature: str | None = None
    provider: str = "anthropic"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tool_call_id: str | None = None
    reasoning: tuple[ReasoningBlock, ...] = ()  # assistant messages only, before their text


def estimate_tokens(text: str) -> int:
    """A cheap upper-ish estimate (4 bytes a token) for what has not been counted by a provider yet."""
    return (len(text.encode("utf-8")) + 3) // 4


def message_tokens(message: ChatMessage) -> int:
    """Estimated tokens of one message, with a small per-message overhead for roles and framing."""
    total = 4 + estimate_tokens(message.content)
    for call in message.tool_calls:
        total += 4 + estimate_tokens(call.name) + estimate_tokens(call.arguments)
    for block in message.reasoning:
        total += estimate_tokens(block.text) + (estimate_tokens(block.signature) if block.signature else 0)
    return total
