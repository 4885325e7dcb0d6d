"""The ordered record a client needs to redraw a conversation.

Entries are immutable snapshots. A tool call is recorded again each time its
state changes; replay keeps the last snapshot of each id, so a process killed
mid-call still leaves the call's last known state behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from term2.domain.content import ContentBlock
from term2.domain.transcript import ContextCompaction, ModelMessage
from term2.domain.usage import TurnUsage


class ToolKind(StrEnum):
    READ = "read"
    EDIT = "edit"
    DELETE = "delete"
    MOVE = "move"
    SEARCH = "search"
    EXECUTE = "execute"
    THINK = "think"
    FETCH = "fetch"
    OTHER = "other"


class ToolStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in (ToolStatus.COMPLETED, ToolStatus.FAILED, ToolStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class Location:
    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class TextOutput:
    text: str
    kind: Literal["text"] = "text"
    # What a program printed (run_code), the sandbox's notices at its end: a view that keeps other texts
    # for the model (a read's, a search's) draws this one's last lines as it does a command's output.
    printed: bool = False


@dataclass(frozen=True, slots=True)
class DiffOutput:
    """A whole-file change; old_text is None when the file was created."""

    path: str
    old_text: str | None
    new_text: str
    kind: Literal["diff"] = "diff"
    # The git patch, computed off the event loop with the change; None in entries recorded before it was.
    patch: str | None = None
    # Whether `path` is the file's exact name, one an editor may act on (open, review, revert). False for a
    # name that is not UTF-8, which has no exact text form: `path` is then the escaped name the model is
    # shown, and an ACP client is sent the diff as text, naming no file (ADR 0034).
    exact_path: bool = True


@dataclass(frozen=True, slots=True)
class TerminalOutput:
    terminal_id: str
    command: str
    cwd: str
    output: str = ""
    exit_code: int | None = None
    signal: str | None = None
    kind: Literal["terminal"] = "terminal"


ToolOutput = TextOutput | DiffOutput | TerminalOutput


@dataclass(frozen=True, slots=True)
class UserMessage:
    message_id: str
    content: tuple[ContentBlock, ...]
    entry: Literal["user_message"] = "user_message"


@dataclass(frozen=True, slots=True)
class AgentMessage:
    message_id: str
    text: str
    entry: Literal["agent_message"] = "agent_message"


@dataclass(frozen=True, slots=True)
class AgentThought:
    message_id: str
    text: str
    entry: Literal["agent_thought"] = "agent_thought"


@dataclass(frozen=True, slots=True)
class ToolCall:
    tool_call_id: str
    title: str
    kind: ToolKind
    status: ToolStatus
    raw_input: dict[str, object] = field(default_factory=dict)
    content: tuple[ToolOutput, ...] = ()
    locations: tuple[Location, ...] = ()
    parent_id: str | None = None  # the run_code call this nested call was made from
    entry: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class PlanEntry:
    content: str
    priority: Literal["high", "medium", "low"] = "medium"
    status: Literal["pending", "in_progress", "completed"] = "pending"


@dataclass(frozen=True, slots=True)
class Plan:
    plan_id: str
    entries: tuple[PlanEntry, ...]
    entry: Literal["plan"] = "plan"


# ModelMessage and ContextCompaction are what the model is shown, TurnUsage what it cost; never replayed.
HistoryEntry = (
    UserMessage | AgentMessage | AgentThought | ToolCall | Plan | ModelMessage | ContextCompaction | TurnUsage
)


def entry_key(entry: HistoryEntry) -> str:
    """The identity under which later snapshots replace earlier ones."""
    if isinstance(entry, ToolCall):
        return f"tool:{entry.tool_call_id}"
    if isinstance(entry, Plan):
        return f"plan:{entry.plan_id}"
    if isinstance(entry, ModelMessage):
        return f"model:{entry.message_id}"
    if isinstance(entry, ContextCompaction):
        return f"compaction:{entry.compaction_id}"
    if isinstance(entry, TurnUsage):
        return f"usage:{entry.turn_id}"
    return f"msg:{entry.message_id}"


def compact(entries: list[HistoryEntry]) -> list[HistoryEntry]:
    """Keep the last snapshot of each identity, at the position it first appeared."""
    order: dict[str, int] = {}
    latest: list[HistoryEntry] = []
    for entry in entries:
        key = entry_key(entry)
        if key in order:
            latest[order[key]] = entry
        else:
            order[key] = len(latest)
            latest.append(entry)
    return latest
