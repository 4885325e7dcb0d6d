"""A session's toolbox: the built-in tools, then the session's MCP tools.

The built-in toolbox is one object for every session; MCP tools belong to one
session and change when its servers start, stop or say their tools changed.
`specs()` is read before every model request, so such a change reaches the
model at the next request, while an unchanged list gives the same specs in
the same order (the provider's prompt cache keys on them). MCP calls run
through a `WorkspaceToolbox` of their own: the same announce, gate, run and
report path as the built-in tools; they never run side by side with others.
"""

from __future__ import annotations

from term2.app.mcp.servers import SessionServers
from term2.app.tools.toolbox import WorkspaceToolbox
from term2.ports.llm import ToolCallRequest, ToolSpec
from term2.ports.tools import Toolbox, ToolContext, ToolReply


class SessionToolbox:
    def __init__(self, builtin: Toolbox, servers: SessionServers) -> None:
        self._builtin = builtin
        self._servers = servers

    def specs(self) -> tuple[ToolSpec, ...]:
        return (*self._builtin.specs(), *(tool.spec() for tool in self._servers.tools()))

    def runs_concurrently(self, call: ToolCallRequest, ctx: ToolContext) -> bool:
        if any(tool.name == call.name for tool in self._servers.tools()):
            return False
        return self._builtin.runs_concurrently(call, ctx)

    async def execute(self, call: ToolCallRequest, ctx: ToolContext) -> str | ToolReply:
        for tool in self._servers.tools():
            if tool.name == call.name:
                return await WorkspaceToolbox((tool,)).execute(call, ctx)
        return await self._builtin.execute(call, ctx)


async def session_toolbox(builtin: Toolbox, servers: SessionServers | None) -> Toolbox:
    """The toolbox a turn uses, once the session's servers still starting have settled (bounded)."""
    if servers is None:
        return builtin
    await servers.started()
    return SessionToolbox(builtin, servers)
