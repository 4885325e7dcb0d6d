"""MCP port: the servers an editor names for a session, reached as providers of tools.

The client (an ACP v1 editor) says which MCP servers the user enabled; term2
starts or dials them and offers their tools to the model. This port is the
whole of what the application needs from an MCP client library: open one
server for as long as a context lasts, list its tools, call one. Everything
else (naming, the approval gate, start-up bounds, when to reconnect) is the
application's (ADR 0023).

A connection is an async context manager because the client library's
transports are structured-concurrency scopes (a subprocess and its pipe tasks,
an HTTP client): they are entered and left by the same task, which is why the
application keeps one supervising task per server.

Errors leave an adapter as `McpError` only, with a `kind` the application
reports on: ``start`` (the server could not be started or did not answer its
handshake in time), ``closed`` (it went away), ``timeout`` (a call took too
long) and ``protocol`` (anything else it answered that was not a result).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

McpErrorKind = Literal["start", "closed", "timeout", "protocol"]


class McpError(Exception):
    def __init__(self, kind: McpErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: McpErrorKind = kind


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server term2 starts as a child process and speaks to over its stdin/stdout."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # as the client gave them, in order (a later name wins)


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A server term2 dials over MCP's streamable HTTP transport."""

    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()


McpServer = StdioServer | HttpServer


@dataclass(frozen=True, slots=True)
class RemoteTool:
    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class MediaPart:
    """An image or audio clip; an image's base64 `data` goes to a model that takes images (ADR 0046)."""

    kind: Literal["image", "audio"]
    mime_type: str
    data: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class ResourcePart:
    """An embedded resource (``text`` when textual, else None for a blob) or a link to one (``linked``)."""

    uri: str
    text: str | None
    mime_type: str | None = None
    linked: bool = False


ResultPart = TextPart | MediaPart | ResourcePart


@dataclass(frozen=True, slots=True)
class RemoteResult:
    parts: tuple[ResultPart, ...]
    structured: Any = None  # the tool's structured output (any JSON value), None when it gave none
    is_error: bool = False  # the tool itself reported a failure (MCP's ``isError``)


class McpConnection(Protocol):
    async def list_tools(self) -> tuple[RemoteTool, ...]:
        """Every tool the server offers now, in its order; raises McpError."""
        ...

    async def call_tool(self, name: str, arguments: Mapping[str, Any], timeout: float) -> RemoteResult:
        """Call one tool; raises McpError. Cancelling the calling task tells the server (MCP cancellation)."""
        ...


class McpClient(Protocol):
    def connect(
        self,
        server: McpServer,
        *,
        cwd: str,
        startup_timeout: float,
        on_tools_changed: Callable[[], None],
        on_closed: Callable[[str], None],
    ) -> AbstractAsyncContextManager[McpConnection]:
        """Start or dial ``server`` and finish MCP's handshake within ``startup_timeout`` seconds.

        Entering raises McpError(``start``) when that fails. ``cwd`` is where a stdio server runs.
        ``on_tools_changed`` is called when the server says its tool list changed;
        ``on_closed`` when the connection ends by itself (a server that exited or hung up, or broke the
        adapter's bounds, which then stops it), with why, in words for the user.
        Leaving ends the server: a stdio server and every process it started are gone by then.
        """
        ...
