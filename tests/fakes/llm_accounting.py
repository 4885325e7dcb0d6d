"""How the fake LLM server measures a prompt: its size, its tokens and its prompt-cache hits.

Prompt size (what `max_prompt_chars` limits and what default usage is priced on)
  The characters of `json.dumps(part, ensure_ascii=False, separators=(",", ":"))`
  where `part` holds only the prompt-bearing keys the request has, in this order:
    openai     {"tools", "messages"}                 (system prompts live in messages)
    anthropic  {"tools", "system", "messages"}
    responses  {"tools", "instructions", "input"}
    gemini     {"tools", "systemInstruction", "contents"}
  Everything else (model, max_tokens, sampling, stream flags, thinking) is not counted.
  Tokens are estimated as ceil(chars / 4).

Prompt cache (simplified; both reset only with the server)
  Anthropic: the prompt is a sequence of blocks (each tool, each system block, then
    each content block of each message with its role; a string is one text block),
    serialised without their `cache_control` markers. The prefix ending at a
    block that carries `cache_control` is written to the cache when the request is
    served. A later request reads from the cache the longest prefix, ending at any
    block boundary up to its last breakpoint, that was written before (the real API
    looks back at most 20 blocks and has a minimum cacheable length; the fake has
    neither). Read tokens = that prefix's chars / 4 (floor) -> cache_read_input_tokens;
    the rest up to the last breakpoint -> cache_creation_input_tokens; input_tokens
    is the remainder of the prompt's tokens.
  OpenAI (chat and Responses): requests are grouped by `prompt_cache_key` (absent is
    a group of its own). cached = longest common prefix, in characters, of the
    serialised messages (chat: `messages`; Responses: `instructions` + `input`) with
    any earlier request of the same group, / 4, rounded down to a multiple of 128 when
    that reaches 1024 tokens, else 0 (the real API also caches tools and routes by a
    prefix hash; it reports cache hits in 128-token steps above 1024 the same way).
  Gemini: no cache (cachedContentTokenCount is never reported).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.fakes.llm_replies import PromptStats

PROMPT_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("tools", "messages"),
    "anthropic": ("tools", "system", "messages"),
    "responses": ("tools", "instructions", "input"),
    "gemini": ("tools", "systemInstruction", "contents"),
}
_OPENAI_HISTORY = 64  # earlier prompts kept per prompt_cache_key


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def prompt_chars(protocol: str, body: Any) -> int:
    """Characters of the serialised prompt-bearing part of a request (see the module doc)."""
    if not isinstance(body, dict):
        return 0
    part = {key: body[key] for key in PROMPT_KEYS.get(protocol, ()) if key in body}
    return len(_dumps(part))


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def tokens_of(chars: int) -> int:
    return -(-chars // 4)


def _without_cache_control(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def anthropic_blocks(body: dict[str, Any]) -> list[tuple[Any, bool]]:
    """The prompt as (block without cache_control, had cache_control) in cache order.

    The order is tools, system blocks, then each message's blocks (with its role).
    """
    out: list[tuple[Any, bool]] = []
    for tool in body.get("tools") or []:
        out.append((_without_cache_control(tool), isinstance(tool, dict) and "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append(({"type": "text", "text": system}, False))
    elif isinstance(system, list):
        for block in system:
            out.append((_without_cache_control(block), isinstance(block, dict) and "cache_control" in block))
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks if isinstance(blocks, list) else []:
            marked = isinstance(block, dict) and "cache_control" in block
            out.append(({"role": role, "block": _without_cache_control(block)}, marked))
    return out


def count_cache_control(body: dict[str, Any]) -> int:
    return sum(marked for _, marked in anthropic_blocks(body))


class PromptCache:
    """The simulated prompt caches of one server (not thread-safe: the state's lock guards it)."""

    def __init__(self) -> None:
        self._anthropic: set[str] = set()
        self._openai: dict[str, list[str]] = {}

    def measure(self, protocol: str, body: Any) -> PromptStats:
        """Measure an admitted request and write what it caches."""
        chars = prompt_chars(protocol, body)
        stats = PromptStats(chars=chars, tokens=tokens_of(chars))
        if not isinstance(body, dict):
            return stats
        if protocol == "anthropic":
            read, creation = self._anthropic_cache(body)
            return PromptStats(chars, stats.tokens, cache_read=read, cache_creation=creation)
        if protocol in ("openai", "responses"):
            return PromptStats(chars, stats.tokens, cached_tokens=min(stats.tokens, self._openai_cache(protocol, body)))
        return stats

    def _anthropic_cache(self, body: dict[str, Any]) -> tuple[int, int]:
        blocks = anthropic_blocks(body)
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        if not marks:
            return 0, 0
        digest = hashlib.sha256()
        prefixes: list[tuple[str, int]] = []  # (digest, chars) of the prefix ending at block i
        chars = 0
        for block, _ in blocks[: marks[-1] + 1]:
            text = _dumps(block)
            digest.update(text.encode() + b"\x1e")
            chars += len(text)
            prefixes.append((digest.hexdigest(), chars))
        read_chars = next((c for d, c in reversed(prefixes) if d in self._anthropic), 0)
        for i in marks:
            self._anthropic.add(prefixes[i][0])
        total = prefixes[-1][1]
        return read_chars // 4, total // 4 - read_chars // 4

    def _openai_cache(self, protocol: str, body: dict[str, Any]) -> int:
        key = f"{protocol}:{body.get('prompt_cache_key')!r}"
        if protocol == "responses":
            text = _dumps([body.get("instructions"), body.get("input")])
        else:
            text = _dumps(body.get("messages"))
        earlier = self._openai.setdefault(key, [])
        common = max((_common_prefix(text, old) for old in earlier), default=0)
        earlier.append(text)
        del earlier[:-_OPENAI_HISTORY]
        tokens = common // 4
        return tokens // 128 * 128 if tokens >= 1024 else 0
