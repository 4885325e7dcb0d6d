"""Reply helpers shared by every wire format of the fake LLM server.

A *reply* is the scripted answer a test pushes (see `tests.fakes.llm_server`);
these functions read it the same way for OpenAI, Anthropic, Responses and Gemini.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

Reply = dict[str, Any]


def split_even(text: str, n: int) -> list[str]:
    if not text:
        return []
    n = max(1, min(n, len(text)))
    size, extra = divmod(len(text), n)
    out, pos = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        out.append(text[pos : pos + step])
        pos += step
    return out


def text_pieces(text: str, chunks: int | None) -> list[str]:
    """The deltas a text is streamed as: N even pieces, or one per word (spaces kept)."""
    if chunks is not None:
        return split_even(text, int(chunks))
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict) and part.get("type") == "tool_result":
                parts.append(text_of(part.get("content", "")))
            elif isinstance(part, dict) and "text" in part and "type" not in part:  # Gemini parts
                parts.append(str(part["text"]))
            elif isinstance(part, dict) and "functionResponse" in part:
                parts.append(json.dumps(part["functionResponse"].get("response", "")))
        return "".join(parts)
    return ""


def _conversation(body: Any) -> list[dict[str, Any]]:
    """Messages of any protocol as [{"role", "content", "tool": bool}] for the echo reply."""
    if not isinstance(body, dict):
        return []
    out: list[dict[str, Any]] = []
    if isinstance(body.get("messages"), list):
        for msg in body["messages"]:
            if not isinstance(msg, dict):
                continue
            content = msg.get("content")
            is_tool = msg.get("role") == "tool" or (
                isinstance(content, list)
                and any(isinstance(p, dict) and p.get("type") == "tool_result" for p in content)
            )
            out.append({"role": msg.get("role"), "content": content, "tool": is_tool})
    elif isinstance(body.get("contents"), list):  # Gemini
        for item in body["contents"]:
            if not isinstance(item, dict):
                continue
            parts = item.get("parts") or []
            is_tool = any(isinstance(p, dict) and "functionResponse" in p for p in parts)
            out.append({"role": item.get("role", "user"), "content": parts, "tool": is_tool})
    elif "input" in body:  # Responses
        items = body["input"]
        if isinstance(items, str):
            return [{"role": "user", "content": items, "tool": False}]
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call_output":
                output = item.get("output")
                text = output if isinstance(output, str) else text_of(output)
                out.append({"role": "tool", "content": text, "tool": True})
            elif item.get("role") in ("user", "assistant", "system", "developer"):
                out.append({"role": item["role"], "content": item.get("content"), "tool": False})
    return out


def default_reply(body: Any) -> Reply:
    """Deterministic answer derived from the conversation, used when no script is queued."""
    messages = _conversation(body)
    if not messages:
        return {"text": "echo: "}
    last = messages[-1]
    if last["tool"]:
        return {"text": "echo tool: " + text_of(last["content"])[:200]}
    for msg in reversed(messages):
        if msg["role"] == "user":
            return {"text": "echo: " + text_of(msg["content"])}
    return {"text": "echo: "}


def finish_of(reply: Reply) -> str:
    return str(reply.get("finish") or ("tool_calls" if reply.get("tool_calls") else "stop"))


def arguments_of(call: dict[str, Any]) -> str:
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args)


def arguments_object(call: dict[str, Any]) -> Any:
    args = call.get("arguments", {})
    return json.loads(args) if isinstance(args, str) else args


@dataclass(frozen=True)
class PromptStats:
    """What the server measured of one admitted request's prompt (see llm_accounting)."""

    chars: int = 0
    tokens: int = 0
    cached_tokens: int = 0  # OpenAI-style: the part of `tokens` served from the prompt cache
    cache_read: int = 0  # Anthropic-style: tokens read from the cache (not in input_tokens)
    cache_creation: int = 0  # Anthropic-style: tokens written to the cache (not in input_tokens)


@dataclass(frozen=True)
class TokenUsage:
    """Token counts of one reply, explicit ("usage" key) or derived from the prompt."""

    input: int  # OpenAI: prompt tokens (cached included); Anthropic: uncached input only
    output: int
    cached: int  # OpenAI cached_tokens / Anthropic cache_read_input_tokens
    cache_creation: int
    reasoning: int


def token_usage(reply: Reply, stats: PromptStats, deltas: int, *, anthropic: bool = False) -> TokenUsage:
    """Explicit `usage` wins field by field; otherwise counts come from the measured prompt.

    Without an explicit input count the prompt is priced at ~4 characters a token
    and the simulated cache applies; with one, cache fields are 0 unless given too.
    """
    usage = reply.get("usage") or {}
    thought_deltas = len(text_pieces(reply.get("thought", ""), reply.get("thought_chunks")))
    reasoning = int(usage.get("reasoning_tokens", thought_deltas))
    out = int(usage.get("output_tokens", usage.get("completion_tokens", deltas)))
    explicit = usage.get("input_tokens", usage.get("prompt_tokens"))
    if explicit is not None:
        cached = int(usage.get("cached_tokens", usage.get("cache_read_input_tokens", 0)))
        creation = int(usage.get("cache_creation_input_tokens", 0))
        return TokenUsage(int(explicit), out, cached, creation, reasoning)
    if anthropic:
        read, creation = stats.cache_read, stats.cache_creation
        return TokenUsage(max(0, stats.tokens - read - creation), out, read, creation, reasoning)
    return TokenUsage(stats.tokens, out, stats.cached_tokens, 0, reasoning)
