"""What a tool is, as the toolbox sees it.

A tool is split in two steps so that nothing runs before it is allowed to:
`prepare` validates the arguments and resolves paths without touching the
filesystem's contents, and returns an Invocation that names the access it
needs; only after the toolbox has checked the workspace rule (and asked the
user if needed) does it call the invocation's `run`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from term2.app.tools.args import Arguments
from term2.domain.history import Location, TextOutput, ToolKind, ToolOutput
from term2.domain.images import Image
from term2.domain.network import NetworkGrant
from term2.domain.workspace import Access
from term2.ports.approval import CommandSubject
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended: the model's text, the client's content, and success."""

    text: str
    content: tuple[ToolOutput, ...] = ()
    failed: bool = False
    locations: tuple[Location, ...] | None = None  # None keeps the prepared ones
    images: tuple[Image, ...] = ()  # for the model beside `text`, where it takes images (ADR 0046)

    @staticmethod
    def text_only(text: str) -> Outcome:
        return Outcome(text, (TextOutput(text),))

    @staticmethod
    def failure(text: str) -> Outcome:
        return Outcome(text, (TextOutput(text),), failed=True)


Runner = Callable[[ToolContext, str], Awaitable[Outcome]]  # (ctx, tool_call_id)


@dataclass(frozen=True, slots=True)
class Invocation:
    """A validated call, ready for the approval decision and then to run."""

    title: str
    access: Access
    target: str  # canonical path the workspace rule judges
    grant_folder: str  # folder an allow-folder answer covers
    locations: tuple[Location, ...]
    run: Runner
    command: CommandSubject | None = None
    git_plant: str | None = None  # folder this edit would make (or finds) a git directory
    content_on_start: Callable[[str], tuple[ToolOutput, ...]] = lambda _call_id: ()
    # What the call would change, computed without changing it (blocking: run in a worker thread),
    # shown with the call before the user is asked so the editor can render a review.
    preview: Callable[[], tuple[ToolOutput, ...]] | None = None
    remote: RemoteCall | None = None  # a call to an MCP server's tool: what the approval question names
    # A call that touches several files (apply_patch): one part per file, each judged (and asked) on its own.
    parts: tuple[Invocation, ...] = ()
    network: NetworkGrant | None = None  # the hosts a command asks for: always asked, allowed once (ADR 0030)


@dataclass(frozen=True, slots=True)
class RemoteCall:
    """Which server and tool a call reaches, and with what, as the user is asked about it (ADR 0023)."""

    server: str  # escaped for display (app/mcp/names.escaped): the server chose its names
    tool: str
    arguments: str  # the arguments as JSON, as the server will get them


class Tool(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> ToolKind: ...

    def spec(self) -> ToolSpec: ...

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        """Validate `args` (raising ArgumentError) without reading or writing files.

        `root` is the session's cwd, the base of relative paths; `extra_roots` its additional directories. A
        path inside one of those is judged, opened and shown from that root, exactly as a path in `root`.
        """
        ...
