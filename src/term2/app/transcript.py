"""The live transcript of a turn: what the next model request is built from, and how full it is.

Each message is recorded as it is added, so a turn that is cancelled, fails
or is killed leaves behind exactly what the model saw, and the next turn
starts from it: the first request of turn N+1 is turn N's last request plus
its answer and the new prompt (an append-only prefix, which is what provider
prompt caches reward).

Occupancy is the provider's own count for the last request plus an estimate
for what was appended since; with no count yet (a new process, a compaction)
all of it is estimated.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from term2.app.clock import new_id
from term2.domain.context_budget import tokens_of
from term2.domain.history import HistoryEntry
from term2.domain.transcript import ChatMessage, ContextCompaction, ModelMessage, apply_compaction, estimate_tokens
from term2.ports.llm import CompletionRequest, ToolSpec

Record = Callable[[HistoryEntry], Awaitable[None]]


class Transcript:
    def __init__(
        self,
        system: ChatMessage,
        tools: tuple[ToolSpec, ...],
        messages: list[ModelMessage],
        record: Record,
        cache_key: str | None = None,
    ) -> None:
        self.system = system
        self.tools = tools
        self.messages = messages
        self._record = record
        self._cache_key = cache_key
        self._fixed = self._fixed_tokens()
        self._counted: tuple[int, int] | None = None  # (provider's tokens, messages they covered)

    def _fixed_tokens(self) -> int:
        return estimate_tokens(self.system.content) + estimate_tokens(
            json.dumps([[t.name, t.description, t.parameters] for t in self.tools])
        )

    def offer(self, tools: tuple[ToolSpec, ...]) -> None:
        """The tools of the next request: a session's MCP tools may have changed since the last one."""
        if tools != self.tools:
            self.tools = tools
            self._fixed = self._fixed_tokens()
            self._counted = None

    @property
    def fixed_tokens(self) -> int:
        """Estimated tokens of what every request repeats: the system prompt and the tool definitions."""
        return self._fixed

    async def add(self, message: ChatMessage) -> ModelMessage:
        item = ModelMessage(new_id("mm"), message)
        self.messages.append(item)
        await self._record(item)
        return item

    def request(self) -> CompletionRequest:
        messages = (self.system, *(m.message for m in self.messages))
        return CompletionRequest(messages, self.tools, cache_key=self._cache_key)

    def counted(self, tokens: int, covered: int) -> None:
        """The provider counted ``tokens`` for the request built from the first ``covered`` messages."""
        self._counted = (tokens, covered)

    def occupancy(self) -> int:
        if self._counted is not None:
            tokens, covered = self._counted
            if covered <= len(self.messages):
                return tokens + tokens_of(self.messages[covered:])
        return self._fixed + tokens_of(self.messages)

    async def compact(self, compaction: ContextCompaction) -> None:
        """Apply and record a compaction; from now on occupancy is estimated until the next count."""
        self.messages[:] = apply_compaction(self.messages, compaction)
        self._counted = None
        await self._record(compaction)
