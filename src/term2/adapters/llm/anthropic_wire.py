"""Pure translations for Anthropic Messages: the request body (the stream's events: `anthropic_stream`).

Kept apart from the HTTP code so the rules Anthropic enforces can be unit-tested
without a server: roles must alternate (so consecutive tool results, and a user
message after them, share one user turn, tool results first); system text is a
top-level field; an assistant turn returns its signed thinking blocks first,
unchanged; and at most 4 ``cache_control`` breakpoints are allowed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from term2.adapters.llm.chat_shapes import thinking_block
from term2.domain.images import Image
from term2.ports.llm import ChatMessage, CompletionRequest, ToolSpec

__all__ = [
    "ANSWER_ROOM",
    "DEFAULT_MAX_TOKENS",
    "MAX_BREAKPOINTS",
    "THINKING_BUDGETS",
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
