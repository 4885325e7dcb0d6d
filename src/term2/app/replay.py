"""History to events: what a reattaching client is sent to redraw a session.

Large tool outputs are cut with a visible marker so that one huge session
cannot flood a client that only wanted to reopen a chat.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

from term2.domain.history import (
    AgentMessage,
    AgentThought,
    DiffOutput,
    HistoryEntry,
    Plan,
    TerminalOutput,
    TextOutput,
    ToolCall,
    ToolOutput,
    UserMessage,
)
from term2.domain.transcript import ContextCompaction, ModelMessage
from term2.domain.truncation import keep_head
from term2.domain.usage import TurnUsage
from term2.ports.updates import PlanChanged, SessionEvent, ToolCallChanged, UserMessageSent, WholeMessage

REPLAY_OUTPUT_LIMIT = 32 * 1024


def truncate(text: str, limit: int = REPLAY_OUTPUT_LIMIT) -> str:
    return keep_head(text, limit, "\n[term2: output truncated in replay, {cut} more characters not shown]")


def _trim(output: ToolOutput) -> ToolOutput:
    if isinstance(output, TextOutput):
        return replace(output, text=truncate(output.text))
    if isinstance(output, TerminalOutput):
        return replace(output, output=truncate(output.output))
    if isinstance(output, DiffOutput):
        old = truncate(output.old_text) if output.old_text is not None else None
        return replace(output, old_text=old, new_text=truncate(output.new_text))
    return output


def replay_event(entry: HistoryEntry) -> SessionEvent | None:
    """The event that redraws ``entry``; None for what only the model is shown (its transcript)."""
    if isinstance(entry, UserMessage):
        return UserMessageSent(entry.message_id, entry.content)
    if isinstance(entry, AgentMessage):
        return WholeMessage(entry.message_id, entry.text)
    if isinstance(entry, AgentThought):
        return WholeMessage(entry.message_id, entry.text, thought=True)
    if isinstance(entry, ToolCall):
        return ToolCallChanged(replace(entry, content=tuple(_trim(c) for c in entry.content)), first=True)
    if isinstance(entry, Plan):
        return PlanChanged(entry)
    if isinstance(entry, (ModelMessage, ContextCompaction, TurnUsage)):
        return None
    raise TypeError(f"unknown history entry {entry!r}")


async def replay(entries: AsyncIterator[HistoryEntry]) -> AsyncIterator[SessionEvent]:
    async for entry in entries:
        event = replay_event(entry)
        if event is not None:
            yield event
