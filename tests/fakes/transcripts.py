"""A live transcript for agent-loop tests, recording into a list like the store would."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from term2.app.transcript import Transcript
from term2.domain.history import HistoryEntry
from term2.domain.transcript import ChatMessage, ModelMessage


def transcript_of(
    *messages: ChatMessage, record: Callable[[HistoryEntry], Awaitable[None]], system: str = "You are term2."
) -> Transcript:
    items = [ModelMessage(f"mm_{i}", m) for i, m in enumerate(messages)]
    return Transcript(ChatMessage("system", system), (), items, record)
