"""Update sink port: what a session tells its client while it works.

The events are protocol-neutral; the ACP adapter renders them as v1 or v2
`session/update` notifications.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from term2.domain.content import ContentBlock
from term2.domain.history import Plan, ToolCall
from term2.domain.turn import StopReason
from term2.domain.usage import TokenUsage


@dataclass(frozen=True, slots=True)
class Spent:
    """This turn's and the session's token totals and costs (USD; None without prices)."""

    turn: TokenUsage
    session: TokenUsage
    turn_cost: float | None
    session_cost: float | None
    reported: bool = True  # False: the provider reported no usage this turn, so `turn` counts nothing measured
    requests: int = 0  # model requests this turn


@dataclass(frozen=True, slots=True)
class UserMessageSent:
    message_id: str
    content: tuple[ContentBlock, ...]


@dataclass(frozen=True, slots=True)
class MessageChunk:
    message_id: str
    text: str
    thought: bool = False


@dataclass(frozen=True, slots=True)
class WholeMessage:
    """A complete message, as sent in replay."""

    message_id: str
    text: str
    thought: bool = False


@dataclass(frozen=True, slots=True)
class ToolCallChanged:
    call: ToolCall
    first: bool  # True when the client has not seen this call id yet


@dataclass(frozen=True, slots=True)
class TerminalChunk:
    tool_call_id: str
    terminal_id: str
    data: bytes


@dataclass(frozen=True, slots=True)
class PlanChanged:
    plan: Plan


@dataclass(frozen=True, slots=True)
class UsageChanged:
    used: int
    size: int
    cost: float | None = None  # the session's cumulative cost, USD, when the model's prices are known
    estimated: bool = False  # `used` is term2's estimate, not (only) the provider's count


@dataclass(frozen=True, slots=True)
class CompactionChanged:
    """A context compaction started or ended; ``summary`` is the whole summary, with ``completed``."""

    compaction_id: str
    status: Literal["in_progress", "completed", "failed", "cancelled"]
    summary: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CompactionChunk:
    """A piece of an in-progress compaction's summary, as the model writes it."""

    compaction_id: str
    text: str


@dataclass(frozen=True, slots=True)
class StateChanged:
    state: Literal["running", "requires_action", "idle"]
    stop_reason: StopReason | None = None
    spent: Spent | None = None  # with idle: what the turn and the session spent


@dataclass(frozen=True, slots=True)
class TitleChanged:
    """The session was named (by its first prompt): v1 clients title the thread and its history entry by it."""

    title: str
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Notice:
    """News for the user about the session, never for the model: a retry, an MCP server that failed,
    a refused host. Never recorded: it is neither history nor transcript.

    A v1 client that advertised `session.notices` gets a `notice` update; any other client gets
    `as_chunk()`, today's text: a thought or an agent message, as `fallback` says, or nothing where
    the news is already shown elsewhere (a refused host, in its command's output) (ADR 0046).
    """

    message_id: str
    text: str
    severity: Literal["info", "warning", "error"] = "info"
    fallback: Literal["thought", "message"] | None = "message"

    def as_chunk(self) -> MessageChunk | None:
        if self.fallback is None:
            return None
        return MessageChunk(self.message_id, self.text, self.fallback == "thought")


SessionEvent = (
    UserMessageSent
    | MessageChunk
    | WholeMessage
    | ToolCallChanged
    | TerminalChunk
    | PlanChanged
    | UsageChanged
    | CompactionChanged
    | CompactionChunk
    | StateChanged
    | TitleChanged
    | Notice
)


class UpdateSink(Protocol):
    async def send(self, session_id: str, event: SessionEvent) -> None: ...
