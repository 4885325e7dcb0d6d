"""Tool port: what the agent loop calls when the model requests a tool.

A toolbox owns the whole life of a call: it checks the workspace rule, asks
the approver, runs the tool (shell commands only through the sandbox),
reports progress to the client and records the call in the history. The
loop only hands over the request and feeds the returned text to the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from term2.domain.approval import ApprovalMode
from term2.domain.editor_exclusion import FolderId
from term2.domain.history import HistoryEntry
from term2.domain.images import Image
from term2.domain.workspace import SessionAccess
from term2.ports.approval import Approver, DenialReason
from term2.ports.client_files import ClientFiles
from term2.ports.folder_locks import FolderLocks
from term2.ports.llm import ToolCallRequest, ToolSpec
from term2.ports.outputs import OutputArchive
from term2.ports.sandbox import Sandbox
from term2.ports.updates import SessionEvent


class LiveInteraction(Protocol):
    """Whether the prompt a tool call belongs to can still take an answer from the user.

    The tool gate asks for the live revision before an approval request and
    checks it again after the answer: an answer for a prompt that was
    cancelled, settled or closed meanwhile is stale, and denied.
    """

    def current(self) -> int | None:
        """The live interaction's revision, or None when no prompt is running."""
        ...

    def is_current(self, revision: int) -> bool: ...


@dataclass(frozen=True, slots=True)
class ToolContext:
    session_id: str
    access: SessionAccess
    approver: Approver
    sandbox: Sandbox
    emit: Callable[[SessionEvent], Awaitable[None]]
    record: Callable[[HistoryEntry], Awaitable[None]]
    interaction: LiveInteraction
    outputs: OutputArchive | None = None  # where results cut for the model are kept whole
    # The editor's own reads and writes where it offers them (ADR 0024); None: the file tools use the disk.
    client_files: ClientFiles | None = None
    # Keeps sandboxed programs and editor requests on the same folders apart (ADR 0038); None: the editor
    # is never asked (nothing would keep a program from moving the path under it).
    folder_locks: FolderLocks | None = None
    # The turn's own approval mode (`/review` runs read-only); None: the session's live mode (ADR 0044).
    mode: ApprovalMode | None = None
    # This call runs because a mode skipped its question (auto): its command's sandbox takes back what it
    # makes of instruction files (ADR 0044). Set by the toolbox for the run only, never by a tool.
    guard_instructions: bool = False
    images: bool = False  # the turn's model takes images: an image a tool read goes to it as one (ADR 0046)
    # The paths whose editor turn an edit already holds, with the way it locked (ADR 0038's one_source): a
    # program on that way waits for the edit to end, so the edit's own requests there need no turn of their own.
    editor_turns: Mapping[str, tuple[FolderId, ...]] = field(default_factory=dict)
    # Told of each call the gate refused (a rejection, no one to ask, read-only): the turn counts them, so a
    # headless caller learns the turn could not do what it needed (`term2 exec`'s status 6, ADR 0045).
    refused: Callable[[DenialReason], None] | None = None

    def approval_mode(self) -> ApprovalMode:
        """The mode the gate judges this call by: the turn's, else the session's as it is now."""
        return self.mode if self.mode is not None else self.access.mode


@dataclass(frozen=True, slots=True)
class ToolReply:
    """A result that carries images beside its text (an image file read, an MCP tool's image), for a model
    that takes them; the text names each image, so the result reads whole even where it is cleared."""

    text: str
    images: tuple[Image, ...]


class Toolbox(Protocol):
    def specs(self) -> tuple[ToolSpec, ...]: ...

    async def execute(self, call: ToolCallRequest, ctx: ToolContext) -> str | ToolReply:
        """Run one call to its end and return the text (and images) the model sees as its result.

        ``call.call_id`` is term2's name for the call, unique in the session (never the
        model's own id, ADR 0021): the history, the client and approvals key the call by it.
        """
        ...

    def runs_concurrently(self, call: ToolCallRequest, ctx: ToolContext) -> bool:
        """True when the call only reads and needs no approval, so it may run beside others.

        Decided without asking anyone or touching file contents; anything
        doubtful (unknown tool, bad arguments, an approval needed) is False,
        and the call then runs alone, in order.
        """
        ...
