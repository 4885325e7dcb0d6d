"""The `mcpServers` of ACP v1's `session/new`, `session/load` and `session/resume`, as the MCP port's values.

ACP v1 says every agent must support stdio servers; term2 also dials http ones
(and says so in `mcpCapabilities`). An entry of another transport (the
deprecated `sse`, the unstable `acp`) is skipped with a notice, never refused:
an editor sends every server the user enabled, whatever the agent advertises,
and a refusal would leave the user with no session at all. A malformed entry
(a missing name or command, a value of the wrong type) is the client's bug and
is refused with -32602 naming the field, like any other parameter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from term2.adapters.acp.errors import INVALID_PARAMS, RpcError
from term2.adapters.acp.params import STR, Request, parse

if TYPE_CHECKING:  # a session without servers opens without the MCP port (ADR 0052)
    from term2.ports.mcp import McpServer


class _NameValue(TypedDict):
    name: str
    value: str


NAME_VALUE = Request[_NameValue]({"name": STR, "value": STR})
NAME_VALUES = {"type": "list", "items_schema": NAME_VALUE.schema}


class _Stdio(TypedDict):
    name: str
    command: str
    args: list[str] | None
    env: list[_NameValue] | None


# What starts or reaches a server is never guessed at: a lone surrogate there is refused (params.parse).
STDIO = Request[_Stdio](
    {"name": STR, "command": STR},
    {"args": {"type": "list", "items_schema": STR}, "env": NAME_VALUES},
    names=frozenset({"command", "args", "env"}),
)


class _Http(TypedDict):
    name: str
    url: str
    headers: list[_NameValue] | None


HTTP = Request[_Http]({"name": STR, "url": STR}, {"headers": NAME_VALUES}, names=frozenset({"url", "headers"}))


def _pairs(items: list[_NameValue] | None) -> tuple[tuple[str, str], ...]:
    return tuple((item["name"], item["value"]) for item in items or ())


def mcp_servers(raw: list[Any] | None, method: str) -> tuple[tuple[McpServer, ...], tuple[str, ...]]:
    """The servers to connect, and a notice for the user about each entry skipped."""
    if not raw:
        return (), ()
    from term2.ports.mcp import HttpServer, StdioServer

    servers: list[McpServer] = []
    skipped: list[str] = []
    for index, item in enumerate(raw or ()):
        where = f"{method} (mcpServers[{index}])"
        if not isinstance(item, dict):
            raise RpcError(INVALID_PARAMS, f"Invalid params for {where}: an MCP server must be an object")
        kind = item.get("type", "stdio")
        if kind == "stdio":
            stdio = parse(STDIO, item, where)
            args = tuple(stdio["args"] or ())
            servers.append(StdioServer(stdio["name"], stdio["command"], args, _pairs(stdio["env"])))
        elif kind == "http" and str(item.get("url", "")).lower().startswith(("http://", "https://")):
            http = parse(HTTP, item, where)
            servers.append(HttpServer(http["name"], http["url"], _pairs(http["headers"])))
        else:
            name = item.get("name") if isinstance(item.get("name"), str) else f"#{index + 1}"
            what = f"the {kind!r} transport" if kind != "http" else "an http URL term2 cannot dial"
            skipped.append(
                f"MCP server {name!r} was skipped: it uses {what}; term2 connects stdio and streamable "
                "http servers only."
            )
    return tuple(servers), tuple(skipped)
