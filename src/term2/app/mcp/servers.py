"""The MCP servers of each open session: started with it, watched, ended with it.

`session/new` (and `load`, `resume`) hands the client's server list over and
returns at once; each server is started or dialled by a supervising task of its
own, bounded by `mcp_startup_timeout`. A turn waits (inside its cancel scope)
for servers still starting, so the first prompt sees their tools, but never
longer than that bound. A server that fails to start or dies later is told to
the user (a message the client shows) and logged, and the session goes on
without its tools. Closing the session, opening it again with another list,
or term2's shutdown leave each server's connection, which ends the process
(the adapter's promise: every process it started, ADR 0040); a crash or a kill of
term2 is the adapter's launcher's parent-death signal.

This module is on the session path (the session use case opens and closes
servers); what calls need is imported by the first turn, and the rules for
the names a server chooses (`names`) by the first server (ADR 0053).

The supervising tasks live in this registry's own task group (`run`, started by
the composition root for the life of the process), not in the request that
opened the session, which ends as soon as it is answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus

from term2.support.deferred_log import get_logger

if TYPE_CHECKING:  # the MCP port loads with a session's first server, not with the first session (ADR 0052)
    from term2.app.mcp.tool import McpTool
    from term2.ports.mcp import McpClient, McpConnection, McpServer, RemoteResult, RemoteTool

log = get_logger("term2.mcp")

Notify = Callable[[str], Awaitable[None]]  # a message for the user of this session
CLOSE_WAIT_S = 10.0  # a server gets its stdin closed, then SIGTERM, then SIGKILL well within this


@dataclass(frozen=True, slots=True)
class McpLimits:
    startup_timeout: float = 30.0
    call_timeout: float = 300.0


class _Link:
    """One server of one session, as its supervisor last saw it."""

    def __init__(self, spec: McpServer) -> None:
        self.spec = spec
        self.connection: McpConnection | None = None
        self.tools: tuple[RemoteTool, ...] = ()
        self.settled = anyio.Event()  # ready, or failed to start
        self.wake = anyio.Event()
        self.stale = False  # the server said its tools changed
        self.hung_up: str | None = None  # the connection ended by itself: why


def _state(link: _Link) -> str:
    if link.connection is not None:
        return f"connected, {len(link.tools)} tools"
    return "unavailable (see the notice and term2's log)" if link.settled.is_set() else "starting"


class SessionServers:
    """The servers one session was opened with."""

    def __init__(
        self,
        session_id: str,
        cwd: str,
        specs: Sequence[McpServer],
        client: Callable[[], Awaitable[McpClient]],
        limits: McpLimits,
        notify: Notify,
        builtin_names: Callable[[], frozenset[str]],
    ) -> None:
        self.session_id = session_id
        self._cwd = cwd
        self._links = [_Link(spec) for spec in specs]
        self._client = client
        self._limits = limits
        self._notify = notify
        self._builtin_names = builtin_names
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        self._tools: tuple[McpTool, ...] | None = None  # named anew when a link's tools change

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    for link in self._links:
                        tg.start_soon(self._supervise, link)
                    task_status.started()
        finally:
            self._done.set()

    async def close(self) -> None:
        self._scope.cancel()
        with anyio.move_on_after(CLOSE_WAIT_S, shield=True):
            await self._done.wait()

    async def started(self) -> None:
        """Wait for every server still starting (each is bounded by the start-up timeout)."""
        with anyio.move_on_after(self._limits.startup_timeout + 5.0):
            for link in self._links:
                await link.settled.wait()

    def states(self) -> tuple[tuple[str, str], ...]:
        """Each server's name and state as its supervisor last saw it, for `/status` (ADR 0043); the name
        escaped as in the notices (names.escaped), so it cannot forge a line of the answer or redraw it."""
        from term2.app.mcp.names import escaped

        return tuple((escaped(link.spec.name), _state(link)) for link in self._links)

    def tools(self) -> tuple[McpTool, ...]:
        """The tools of every connected server, in the client's server order, named for the model."""
        from term2.app.mcp.names import tool_names
        from term2.app.mcp.tool import McpTool  # the tool machinery: loaded with the turn part, not with sessions

        if self._tools is None:
            pairs: list[tuple[_Link, RemoteTool]] = [
                (link, tool) for link in self._links if link.connection is not None for tool in link.tools
            ]
            names = tool_names(((link.spec.name, tool.name) for link, tool in pairs), self._builtin_names())
            self._tools = tuple(
                McpTool(name, link.spec.name, tool, self._caller(link))
                for name, (link, tool) in zip(names, pairs, strict=True)
            )
        return self._tools

    def _caller(self, link: _Link) -> Callable[[str, Mapping[str, Any]], Awaitable[RemoteResult]]:
        async def call(tool: str, arguments: Mapping[str, Any]) -> RemoteResult:
            from term2.ports.mcp import McpError

            connection = link.connection
            if connection is None:
                raise McpError("closed", "not connected")
            return await connection.call_tool(tool, arguments, self._limits.call_timeout)

        return call

    def _changed(self) -> None:
        self._tools = None

    async def _supervise(self, link: _Link) -> None:
        from term2.ports.mcp import McpError

        name = link.spec.name

        def on_tools_changed() -> None:
            link.stale = True
            link.wake.set()

        def on_closed(why: str) -> None:
            link.hung_up = why
            link.wake.set()

        try:
            client = await self._client()
            async with client.connect(
                link.spec,
                cwd=self._cwd,
                startup_timeout=self._limits.startup_timeout,
                on_tools_changed=on_tools_changed,
                on_closed=on_closed,
            ) as connection:
                with anyio.fail_after(self._limits.startup_timeout):
                    link.tools = await connection.list_tools()
                link.connection = connection
                self._changed()
                link.settled.set()
                log.info("MCP server connected", session_id=self.session_id, server=name, tools=len(link.tools))
                await self._watch(link, connection)
        except McpError as err:
            await self._report(link, f"could not be started: {err}")
        except TimeoutError:
            await self._report(link, "did not list its tools in time")
        except Exception as err:  # a bug or an unexpected library error must not end the other servers
            log.exception("MCP server supervisor failed", session_id=self.session_id, server=name)
            await self._report(link, f"failed: {err}")
        finally:
            link.connection = None
            self._changed()
            link.settled.set()

    async def _watch(self, link: _Link, connection: McpConnection) -> None:
        from term2.ports.mcp import McpError

        while True:
            await link.wake.wait()
            link.wake = anyio.Event()
            if link.hung_up is not None:
                link.connection = None
                self._changed()
                await self._report(link, f"stopped ({link.hung_up}); its tools are gone")
                return
            if link.stale:
                link.stale = False
                try:
                    with anyio.fail_after(self._limits.startup_timeout):
                        link.tools = await connection.list_tools()
                except (McpError, TimeoutError) as err:
                    log.warning("MCP server could not list its changed tools", server=link.spec.name, error=str(err))
                    continue
                self._changed()
                log.info("MCP server's tools changed", session_id=self.session_id, server=link.spec.name)

    async def _report(self, link: _Link, what: str) -> None:
        from term2.app.mcp.names import escaped

        text = (  # the reason may quote the server (an error it sent): escaped like all it says (names.escaped)
            f"MCP server '{escaped(link.spec.name)}' {escaped(what)}. The session goes on without its tools; "
            "term2's log (its stderr) has the details."
        )
        log.warning("MCP server unavailable", session_id=self.session_id, server=link.spec.name, reason=what)
        with anyio.CancelScope(shield=True), anyio.move_on_after(5.0):
            try:
                await self._notify(text)
            except Exception:
                log.exception("could not tell the user about an MCP server")


class McpSessions:
    """Every open session's MCP servers, by session id: what `session/*` opens and a turn's toolbox reads."""

    def __init__(
        self,
        client_factory: Callable[[], McpClient],
        limits: McpLimits = McpLimits(),
        builtin_names: Callable[[], frozenset[str]] = frozenset,
    ) -> None:
        self._client_factory = client_factory  # imports the MCP library: called once, off the event loop
        self._client: McpClient | None = None
        self._client_lock = anyio.Lock()
        self._limits = limits
        self._builtin_names = builtin_names
        self._sessions: dict[str, SessionServers] = {}
        self._tg: TaskGroup | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the supervisors' task group for the life of the process; cancelling it ends every server."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._tg = None

    async def _get_client(self) -> McpClient:
        async with self._client_lock:
            if self._client is None:
                self._client = await anyio.to_thread.run_sync(self._client_factory)
            return self._client

    async def open(self, session_id: str, cwd: str, specs: Sequence[McpServer], notify: Notify) -> None:
        """Connect ``specs`` for the session, in the background, after ending the servers it had."""
        await self.close(session_id)
        if not specs:
            return
        if self._tg is None:
            raise RuntimeError("the MCP registry is not running")
        servers = SessionServers(session_id, cwd, specs, self._get_client, self._limits, notify, self._builtin_names)
        self._sessions[session_id] = servers
        await self._tg.start(servers.run)

    async def close(self, session_id: str) -> None:
        servers = self._sessions.pop(session_id, None)
        if servers is not None:
            await servers.close()

    def servers(self, session_id: str) -> SessionServers | None:
        return self._sessions.get(session_id)
