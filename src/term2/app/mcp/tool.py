"""One MCP server's tool as a term2 tool: named for the model, gated like every other call.

It goes through the same toolbox path as the built-in tools (announced,
asked, run, reported, recorded), with `Access.CALL`: the gate asks the user
every time, offering only "allow once" and "reject" (ADR 0023). A rejected
call never reaches the server, because `run` is only called once the gate
said yes. The server is looked up when the call runs, not when the model saw
the tool: a server that went away since gives a tool error the model reads.

What the user sees of the call is escaped (`names.escaped`): the title and the
question name the server's tool on one line, its errors and results reach the
editor with nothing that acts on the display. The arguments are shown as the
call's content (announced with the call, so the permission request carries
them too): pretty JSON, bounded, escaped, since some editors show an
approval's title and content but not its raw input (ADR 0040).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from term2.app.mcp.names import escaped
from term2.app.mcp.results import render_result
from term2.app.results import RESULT_LIMIT
from term2.app.tools.args import Arguments
from term2.app.tools.base import Invocation, Outcome, RemoteCall
from term2.app.tools.failure import ToolFailed
from term2.domain.history import TextOutput, ToolKind
from term2.domain.truncation import keep_ends
from term2.domain.workspace import Access
from term2.ports.llm import ToolSpec
from term2.ports.mcp import McpError, RemoteResult, RemoteTool
from term2.ports.tools import ToolContext

MAX_DESCRIPTION = 4000  # characters of a server's tool description sent to the model
ARGUMENTS_CONTENT = 4000  # characters of a call's arguments shown as its content (rawInput has them all)

# (tool, arguments) -> the result; raises McpError. Bound to one server by the session's registry.
CallRemote = Callable[[str, Mapping[str, Any]], Awaitable[RemoteResult]]

FAILURE_TEXT = {
    "closed": "the server is gone (it exited or closed the connection); its tools are no longer available",
    "timeout": "the call took longer than term2 allows (mcp_call_timeout) and was cancelled",
    "start": "the server is not running",
    "protocol": "the server answered with an error",
}


def _object_schema(schema: Mapping[str, Any]) -> dict[str, object]:
    """Providers want an object schema at the root; a server that sent something else gets one."""
    parameters = dict(schema)
    if parameters.get("type") != "object":
        return {"type": "object", "properties": {}}
    return parameters


def arguments_content(arguments: Mapping[str, Any]) -> tuple[TextOutput, ...]:
    """The call's arguments as the user reviews them: indented JSON, ends kept past the bound, escaped."""
    text = json.dumps(arguments, ensure_ascii=False, indent=2, default=str)
    bounded = keep_ends(text, ARGUMENTS_CONTENT, "\n[... {cut} characters cut ...]\n")
    return (TextOutput(f"Arguments:\n```json\n{escaped(bounded, lines=True)}\n```"),)


class McpTool:
    def __init__(self, name: str, server: str, remote: RemoteTool, call: CallRemote) -> None:
        self._name = name
        self._server = server
        self._remote = remote
        self._call = call

    @property
    def name(self) -> str:
        return self._name

    @property
    def kind(self) -> ToolKind:
        return ToolKind.OTHER

    def spec(self) -> ToolSpec:
        description = self._remote.description[:MAX_DESCRIPTION]
        origin = (
            f"(Tool {self._remote.name!r} of the MCP server {self._server!r}, which the user's editor provides; "
            "every call needs the user's approval.)"
        )
        return ToolSpec(
            self._name,
            f"{description}\n\n{origin}" if description else origin,
            _object_schema(self._remote.input_schema),
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        arguments = dict(args)
        shown = json.dumps(arguments, ensure_ascii=False, default=str)
        server, tool = escaped(self._server), escaped(self._remote.name)

        async def run(ctx: ToolContext, call_id: str) -> Outcome:
            try:
                result = await self._call(self._remote.name, arguments)
            except McpError as err:
                raise ToolFailed(
                    f"MCP server '{server}', tool '{tool}': {FAILURE_TEXT[err.kind]}: {escaped(str(err))}"
                ) from None
            text, images = render_result(result, ctx.images)
            shown_to_client = keep_ends(text, RESULT_LIMIT, "\n[... {cut} characters cut ...]\n")
            content = (TextOutput(escaped(shown_to_client, lines=True)),)
            return Outcome(text, content, failed=result.is_error, images=images)

        return Invocation(
            title=f"{tool} (MCP server '{server}')",
            access=Access.CALL,
            target=f"mcp:{self._server}/{self._remote.name}",
            grant_folder="",
            locations=(),
            run=run,
            remote=RemoteCall(server, tool, shown),
            preview=lambda: arguments_content(arguments),
        )
