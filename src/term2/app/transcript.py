"""The live transcript of a turn: what the next model request is built from, and how full it is.

Each message is recorded as it is added, so a turn that is cancelled, fails
or is killed leaves behind exactly what the model saw, and the next turn
starts from it: the first request of turn N+1 is turn N's last request plus
its answer and the new prompt (an append-only prefix, which is what provider
prompt caches reward).

Occupancy is the provider's own count for the last request plus an estimate
for what was appended since; with no count yet (a new process, a compaction)
all of it is estimated. Estimates are scaled by what the session's earlier
counts taught (`ContextMemory`: the bytes-a-token ratio, whether the server
shows the model the tools), and the last count carries over to the next turn.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from term2.app.clock import new_id
from term2.domain.context_budget import tokens_of
from term2.domain.context_estimate import ContextMemory
from term2.domain.history import HistoryEntry
from term2.domain.transcript import (
    ChatMessage,
    ContextCompaction,
    ModelMessage,
    apply_compaction,
    estimate_tokens,
    newest_images,
)
from term2.ports.llm import CompletionRequest, PromptCount, ToolSpec

Record = Callable[[HistoryEntry], Awaitable[None]]


class Transcript:
    def __init__(
        self,
        system: ChatMessage,
        tools: tuple[ToolSpec, ...],
        messages: list[ModelMessage],
        record: Record,
        cache_key: str | None = None,
        *,
        memory: ContextMemory | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.system = system
        self.tools = tools
        self.messages = messages
        self._record = record
        self._cache_key = cache_key
        self.memory = memory if memory is not None else ContextMemory()
        self._max_tokens = max_tokens
        self._system_raw = estimate_tokens(system.content)
        self._tools_raw = self._tools_tokens()
        self._counted: tuple[int, int] | None = self._carried_count()  # (provider's tokens, messages they covered)

    def _tools_tokens(self) -> int:
        return estimate_tokens(json.dumps([[t.name, t.description, t.parameters] for t in self.tools]))

    def _carried_count(self) -> tuple[int, int] | None:
        """The previous turn's last count, when the message it ended on is still where the model saw it."""
        count = self.memory.count
        if count is None:
            return None
        tokens, last_id = count
        for index, item in enumerate(self.messages):
            if item.message_id == last_id:
                return tokens, index + 1
        return None

    def offer(self, tools: tuple[ToolSpec, ...]) -> None:
        """The tools of the next request: a session's MCP tools may have changed since the last one."""
        if tools != self.tools:
            self.tools = tools
            self._tools_raw = self._tools_tokens()
            self._counted = None

    @property
    def fixed_tokens(self) -> int:
        """Estimated tokens of what every request repeats: the system prompt and the tools the model is shown."""
        return self.memory.scale(self._system_raw + self.memory.tools(self._tools_raw))

    def prompt_tokens(self) -> int:
        """What no compaction can shed, at least: the system prompt, the newest user message, and the tools
        once a count showed the model sees them (before that they may be left out, as some servers do)."""
        last_user = next((m for m in reversed(self.messages) if m.message.role == "user"), None)
        tail = tokens_of([last_user]) if last_user is not None else 0
        tools = self._tools_raw if self.memory.tools_shown else 0
        return self.memory.scale(self._system_raw + tools + tail)

    def served_uncounted(self, window: int | None) -> None:
        """The last request was answered without a count: whatever the estimate said, it fit ``window``."""
        if window is not None and not self.reported:
            self.memory.bound(self._system_raw + tokens_of(self.messages), self._tools_raw, window)

    async def add(self, message: ChatMessage, stored: ChatMessage | None = None) -> ModelMessage:
        """``stored``: what the history keeps of ``message`` when it differs (a prompt's images are kept once,
        with the user's message, and put back when the transcript is read: `conversation.model_transcript`)."""
        item = ModelMessage(new_id("mm"), message)
        self.messages.append(item)
        await self._record(item if stored is None else ModelMessage(item.message_id, stored))
        return item

    async def withdraw_prompt(self) -> None:
        """Take the newest message back out of what the model is shown, when it is the turn's unsent prompt."""
        if self.messages and self.messages[-1].message.role == "user":
            await self.compact(ContextCompaction(new_id("compaction"), withdrawn=(self.messages[-1].message_id,)))

    def request(self) -> CompletionRequest:
        messages = newest_images((self.system, *(m.message for m in self.messages)))
        return CompletionRequest(messages, self.tools, max_tokens=self._max_tokens, cache_key=self._cache_key)

    def counted(self, tokens: int, covered: int) -> None:
        """The provider counted ``tokens`` for the request from the first ``covered`` messages (its answer too)."""
        self._counted = (tokens, covered)
        self.memory.learn(tokens, self._system_raw + tokens_of(self.messages[:covered]), self._tools_raw)
        if 0 < covered <= len(self.messages):
            self.memory.count = (tokens, self.messages[covered - 1].message_id)

    def calibrate(self, count: PromptCount) -> None:
        """What a count asked of a server that reports none teaches (`PromptCount`)."""
        if count.whole:
            self.counted(count.tokens, len(self.messages))
            return
        text = "\n".join([self.system.content, *(m.message.content for m in self.messages)])
        self.memory.learn_text(count.tokens, estimate_tokens(text))

    def occupancy(self) -> int:
        if self._counted is not None:
            tokens, covered = self._counted
            if covered <= len(self.messages):
                return tokens + self.memory.scale(tokens_of(self.messages[covered:]))
        return self.fixed_tokens + self.memory.scale(tokens_of(self.messages))

    @property
    def reported(self) -> bool:
        """Whether `occupancy` is the provider's own count, nothing estimated on top of it."""
        return self._counted is not None and self._counted[1] == len(self.messages)

    async def compact(self, compaction: ContextCompaction) -> None:
        """Apply and record a compaction; from now on occupancy is estimated until the next count."""
        self.messages[:] = apply_compaction(self.messages, compaction)
        self._counted = None
        self.memory.count = None
        await self._record(compaction)
