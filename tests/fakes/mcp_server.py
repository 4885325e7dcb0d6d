"""A real MCP server, written with the official SDK, that records what reaches it.

Run as ``python -m tests.fakes.mcp_server --record FILE [--marker M] [--http PORT]``:
stdio by default (as an editor would start it), or streamable HTTP on
127.0.0.1:PORT at ``/mcp``. Every call it receives is appended to FILE as one
JSON line (``{"tool", "arguments", ...}``), so a test can prove that a call did,
or did not, reach the server, and that a cancelled call was cancelled here.
``--marker`` is only there to be found in /proc by the tests.

Tools: ``echo`` (text back, with the ``x-token`` header it came with over
HTTP), ``fail`` (a tool error: MCP's ``isError``), ``slow`` (waits, records a
cancellation), ``grow`` (adds the tool ``extra`` and tells the client its list
changed), ``env`` (a variable of its environment) and ``where`` (its cwd).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from tests.fakes.images import png


def build(record: Path) -> MCPServer:
    server = MCPServer("fake-mcp")

    def note(tool: str, arguments: dict[str, object], **extra: object) -> None:
        with record.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"tool": tool, "arguments": arguments, **extra}) + "\n")

    @server.tool(description="Echo the text back.")
    def echo(text: str, ctx: Context) -> str:
        headers = ctx.headers or {}
        note("echo", {"text": text}, token=headers.get("x-token"))
        return f"echo: {text}"

    @server.tool(description="A small grey picture.")
    def picture() -> Image:
        note("picture", {})
        return Image(data=png(), format="png")

    @server.tool(description="Always fails, as a tool error.")
    def fail() -> str:
        note("fail", {})
        raise ToolError("broken on purpose")

    @server.tool(description="Wait for the given seconds.")
    async def slow(seconds: float) -> str:
        note("slow", {"seconds": seconds})
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            note("slow", {"seconds": seconds}, cancelled=True)
            raise
        return "slept"

    @server.tool(description="Add the tool 'extra'.")
    async def grow(ctx: Context) -> str:
        note("grow", {})

        def extra() -> str:
            note("extra", {})
            return "extra!"

        server.add_tool(extra, name="extra", description="Added by grow.")
        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool(description="One environment variable.")
    def env(name: str) -> str:
        note("env", {"name": name})
        return os.environ.get(name, "<unset>")

    @server.tool(description="The server's working directory.")
    def where() -> str:
        note("where", {})
        return os.getcwd()

    return server


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", required=True)
    parser.add_argument("--marker", default="")
    parser.add_argument("--http", type=int, default=0)
    args = parser.parse_args(argv)
    server = build(Path(args.record))
    if args.http:
        anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=args.http))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
