"""The MCP port on the official SDK's client (`mcp`, anyio-based like term2).

Why the SDK and not a client of our own: MCP's handshake, version negotiation,
pagination, cancellation and the streamable HTTP transport are the SDK's to
keep up with. This module only adapts it: SDK types become the port's values,
and every SDK or transport failure becomes `McpError` here, at the boundary.

Stdio servers run as the user configured them in the editor (ADR 0023), through
term2's own transport (`stdio.py`, ADR 0040) rather than the SDK's, with three
things added by term2:
- the SDK's minimal inherited environment (PATH, HOME, USER, ...; never term2's
  own, which holds the model provider's keys) plus the client's `env`;
- a launcher (`launcher.py`, a child subreaper with a parent-death signal), so
  that no process the server starts, detached or not, outlives its session or
  term2, however term2 ends (session/close, exit, SIGTERM, SIGKILL);
- stdout read as bounded lines in linear time, and stderr to term2's log
  (bounded), never to stdout, which is the ACP protocol.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic_core import ValidationError

from term2.adapters.mcp.stdio import stdio_transport
from term2.domain.mended_text import loads, may_hold_lone_surrogates
from term2.ports.mcp import (
    HttpServer,
    McpError,
    McpServer,
    MediaPart,
    RemoteResult,
    RemoteTool,
    ResourcePart,
    ResultPart,
    StdioServer,
    TextPart,
)
from term2.support.deferred_log import get_logger

log = get_logger("term2.mcp")
MAX_LOGGED_ERRORS = 20  # lines from a server that are not MCP messages, logged; the rest are counted out
MAX_ERROR_TEXT = 1000  # characters of one such error logged

MAX_TOOL_PAGES = 20  # a server that pages forever is cut off, not followed
CLIENT_INFO = types.Implementation(name="term2", version="0")

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], Any]


class SdkMcpClient:
    @asynccontextmanager
    async def connect(
        self,
        server: McpServer,
        *,
        cwd: str,
        startup_timeout: float,
        on_tools_changed: Callable[[], None],
        on_closed: Callable[[str], None],
    ) -> AsyncIterator[SdkConnection]:
        """The port's `connect`; the SDK's task groups wrap what they raise in groups, unwrapped here."""
        try:
            async with self._open(server, cwd, startup_timeout, on_tools_changed, on_closed) as connection:
                yield connection
        except BaseExceptionGroup as group:
            raise _unwrap(group) from None

    @asynccontextmanager
    async def _open(
        self,
        server: McpServer,
        cwd: str,
        startup_timeout: float,
        on_tools_changed: Callable[[], None],
        on_closed: Callable[[str], None],
    ) -> AsyncIterator[SdkConnection]:
        errors = 0

        async def on_message(message: IncomingMessage) -> None:
            nonlocal errors
            if isinstance(message, types.ToolListChangedNotification):
                on_tools_changed()
            elif isinstance(message, Exception):
                # Bounded like the server's stderr (stdio.MAX_LOG): each line that is not a message would
                # otherwise cost the editor's log ~100 times its size (the parse error's text).
                errors += 1
                if errors <= MAX_LOGGED_ERRORS:
                    log.warning("MCP transport error", server=server.name, error=str(message)[:MAX_ERROR_TEXT])
                if errors == MAX_LOGGED_ERRORS:
                    log.warning("MCP server's transport errors are no longer logged", server=server.name)

        async with AsyncExitStack() as stack:
            try:
                read, write = await stack.enter_async_context(self._transport(server, cwd))
            except Exception as exc:  # OSError (no such command), ValueError (NUL bytes), an SDK error
                raise McpError("start", f"could not start: {_describe(exc)}") from None
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)  # the relay below ends with the connection
            relayed_send, relayed = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            tg.start_soon(_relay, read, relayed_send, on_closed)
            session = await stack.enter_async_context(
                ClientSession(relayed, write, message_handler=on_message, client_info=CLIENT_INFO)
            )
            try:
                with anyio.fail_after(startup_timeout):
                    await session.initialize()
            except TimeoutError:
                raise McpError("start", f"did not finish MCP's handshake within {startup_timeout:g} s") from None
            except Exception as exc:
                raise McpError("start", f"failed MCP's handshake: {_describe(exc)}") from None
            yield SdkConnection(session)

    def _transport(self, server: McpServer, cwd: str) -> Any:
        if isinstance(server, StdioServer):
            return stdio_transport(server, cwd)
        return _http(server)


@asynccontextmanager
async def _http(server: HttpServer) -> AsyncIterator[Any]:
    client = create_mcp_http_client(headers=dict(server.headers))
    async with client, streamable_http_client(server.url, http_client=client) as streams:
        yield streams


async def _relay(
    read: MemoryObjectReceiveStream[SessionMessage | Exception],
    out: Any,
    on_closed: Callable[[str], None],
) -> None:
    """Pass messages on, and tell when the server's side ends: a dead server is noticed now, not at the next call.

    The transport ends a server that broke its bounds by sending the McpError that says so, then closing:
    that is the reason given, and the session sees the connection end (a pending call fails at once).
    """
    why = "it exited or closed the connection"
    try:
        async with out:
            async for item in read:
                if isinstance(item, McpError):
                    why = str(item)
                    break
                await out.send(_mended(item))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    on_closed(why)


def _mended(item: SessionMessage | Exception) -> SessionMessage | Exception:
    """A message the SDK could not read only because it escapes a lone surrogate, read with each one mended.

    The SDK reads JSON with pydantic's parser, which refuses `"\\ud800"`: the line becomes an error the
    session only logs, and the call it answers waits for its timeout, its result lost. A server's text is
    not the place for a lone surrogate, but it is the server's answer: read again with Python's decoder,
    each becomes U+FFFD (`term2.domain.mended_text`), and the result arrives. (A JSON body over HTTP that
    fails so reaches term2 only as the SDK's -32700 error, which the call reports.)
    """
    if not isinstance(item, ValidationError):
        return item
    problems = item.errors()
    raw = problems[0].get("input") if len(problems) == 1 and problems[0]["type"] == "json_invalid" else None
    if not isinstance(raw, (str, bytes)) or not may_hold_lone_surrogates(raw):
        return item
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(loads(raw), by_name=False))
    except (ValueError, RecursionError):  # not JSON for another reason too, or not a JSON-RPC message
        return item


class SdkConnection:
    def __init__(self, session: ClientSession) -> None:
        self._session = session

    async def list_tools(self) -> tuple[RemoteTool, ...]:
        tools: list[RemoteTool] = []
        cursor: str | None = None
        try:
            for _ in range(MAX_TOOL_PAGES):
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await self._session.list_tools(params=params)
                tools.extend(
                    RemoteTool(tool.name, tool.description or tool.title or "", dict(tool.input_schema))
                    for tool in page.tools
                )
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as exc:
            raise _error(exc) from None
        return tuple(tools)

    async def call_tool(self, name: str, arguments: Mapping[str, Any], timeout: float) -> RemoteResult:
        try:
            result = await self._session.call_tool(name, dict(arguments), read_timeout_seconds=timeout)
        except Exception as exc:
            raise _error(exc) from None
        if not isinstance(result, types.CallToolResult):  # an input request: term2 cannot answer one
            raise McpError("protocol", "the server asked for input during the call, which term2 does not provide")
        parts = tuple(_part(block) for block in result.content)
        return RemoteResult(parts, result.structured_content, bool(result.is_error))


def _part(block: types.ContentBlock) -> ResultPart:
    if isinstance(block, types.TextContent):
        return TextPart(block.text)
    if isinstance(block, types.ImageContent):
        return MediaPart("image", block.mime_type, block.data)
    if isinstance(block, types.AudioContent):
        return MediaPart("audio", block.mime_type)
    if isinstance(block, types.ResourceLink):
        return ResourcePart(str(block.uri), None, block.mime_type, linked=True)
    resource = block.resource
    text = resource.text if isinstance(resource, types.TextResourceContents) else None
    return ResourcePart(str(resource.uri), text, resource.mime_type)


def _error(exc: Exception) -> McpError:
    if isinstance(exc, McpError):
        return exc
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED:
            return McpError("closed", "the server closed the connection")
        if exc.code == types.REQUEST_TIMEOUT:
            return McpError("timeout", "the server did not answer in time")
        return McpError("protocol", f"the server answered with error {exc.code}: {exc.message}")
    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)):
        return McpError("closed", "the server closed the connection")
    return McpError("protocol", _describe(exc))


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one failure a group stands for: an McpError first, else its only member; cancellation stays a group."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        item = pending.pop()
        if isinstance(item, BaseExceptionGroup):
            pending.extend(item.exceptions)
        else:
            leaves.append(item)
    cancelled = anyio.get_cancelled_exc_class()
    if all(isinstance(leaf, cancelled) for leaf in leaves):
        return group
    for leaf in leaves:
        if isinstance(leaf, McpError):
            return leaf
    real = [leaf for leaf in leaves if not isinstance(leaf, cancelled)]
    return real[0] if len(real) == 1 else McpError("protocol", _describe(group))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _describe(exc.exceptions[0])
    if isinstance(exc, MCPError):
        return exc.message
    return str(exc) or type(exc).__name__
