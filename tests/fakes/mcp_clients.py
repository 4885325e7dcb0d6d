"""An in-memory MCP port adapter: servers are Python objects, so the app layer is tested without processes.

It keeps the port's promises the real adapter keeps (the contract suite runs
both): start failures and hang-ups as `McpError`, `on_closed` when a server
hangs up, `on_tools_changed` when its tools change, a timeout as ``timeout``,
and a cancelled call cancelled at the server too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from term2.ports.mcp import McpError, McpServer, RemoteResult, RemoteTool, TextPart

Handler = Callable[[Mapping[str, Any]], Awaitable[RemoteResult]]


@dataclass
class FakeServer:
    tools: dict[str, tuple[RemoteTool, Handler]] = field(default_factory=dict)
    fail_start: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    closed: bool = False
    _on_changed: Callable[[], None] | None = None
    _on_closed: Callable[[str], None] | None = None
    _gone: bool = False

    def add(self, name: str, handler: Handler, description: str = "", schema: dict[str, Any] | None = None) -> None:
        remote = RemoteTool(name, description, schema or {"type": "object", "properties": {}})
        self.tools[name] = (remote, handler)
        if self._on_changed is not None:
            self._on_changed()

    def hang_up(self) -> None:
        self._gone = True
        if self._on_closed is not None:
            self._on_closed("it exited or closed the connection")


def standard_server() -> FakeServer:
    """The tools of `tests/fakes/mcp_server.py`, in memory."""
    server = FakeServer()

    async def echo(args: Mapping[str, Any]) -> RemoteResult:
        return RemoteResult((TextPart(f"echo: {args.get('text')}"),))

    async def fail(args: Mapping[str, Any]) -> RemoteResult:
        return RemoteResult((TextPart("broken on purpose"),), is_error=True)

    async def slow(args: Mapping[str, Any]) -> RemoteResult:
        await anyio.sleep(float(args.get("seconds", 0)))
        return RemoteResult((TextPart("slept"),))

    async def grow(args: Mapping[str, Any]) -> RemoteResult:
        async def extra(_: Mapping[str, Any]) -> RemoteResult:
            return RemoteResult((TextPart("extra!"),))

        server.add("extra", extra, "Added by grow.")
        return RemoteResult((TextPart("grown"),))

    text_schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    server.add("echo", echo, "Echo the text back.", text_schema)
    server.add("fail", fail, "Always fails, as a tool error.")
    server.add("slow", slow, "Wait for the given seconds.")
    server.add("grow", grow, "Add the tool 'extra'.")
    return server


class _Connection:
    def __init__(self, server: FakeServer) -> None:
        self._server = server

    async def list_tools(self) -> tuple[RemoteTool, ...]:
        if self._server._gone:
            raise McpError("closed", "the server closed the connection")
        return tuple(remote for remote, _ in self._server.tools.values())

    async def call_tool(self, name: str, arguments: Mapping[str, Any], timeout: float) -> RemoteResult:
        server = self._server
        if server._gone:
            raise McpError("closed", "the server closed the connection")
        server.calls.append((name, dict(arguments)))
        if name not in server.tools:
            return RemoteResult((TextPart(f"Unknown tool: {name}"),), is_error=True)
        try:
            with anyio.fail_after(timeout):
                return await server.tools[name][1](arguments)
        except TimeoutError:
            raise McpError("timeout", "the server did not answer in time") from None
        except anyio.get_cancelled_exc_class():
            server.cancelled.append(name)
            raise


@dataclass
class FakeMcpClient:
    servers: dict[str, FakeServer] = field(default_factory=dict)
    connected: list[str] = field(default_factory=list)

    @asynccontextmanager
    async def connect(
        self,
        server: McpServer,
        *,
        cwd: str,
        startup_timeout: float,
        on_tools_changed: Callable[[], None],
        on_closed: Callable[[str], None],
    ) -> AsyncIterator[_Connection]:
        found = self.servers.get(server.name)
        if found is None or found.fail_start is not None:
            raise McpError("start", f"could not start: {found.fail_start if found else 'no such server'}")
        found._on_changed, found._on_closed, found._gone, found.closed = on_tools_changed, on_closed, False, False
        self.connected.append(server.name)
        try:
            yield _Connection(found)
        finally:
            found.closed = True
            found._on_changed = found._on_closed = None
