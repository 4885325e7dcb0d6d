"""A stdio MCP server written by hand, to send what the official SDK never would: lone surrogates.

JSON may escape a lone UTF-16 surrogate (`"\\ud800"`), and a server in another language (or one that
cuts a string between the halves of a pair) can send one. The SDK's server cannot: its serializer
refuses such a str. This one writes its JSON with Python's encoder, which escapes it, so a test can
check what term2 makes of it: the tool's description and every result carry `\\ud800` (lone), `\\udc00`
(lone) and `\\ud83d\\ude00` (a valid pair, 😀).

Run as ``python -m tests.fakes.mcp_raw_server``. It answers `initialize`, `tools/list` (one tool,
``lone``, which takes ``text``), `tools/call` and `ping`; notifications are read and ignored.

It also says what a hostile server would: ``RAW_TOOL`` in its environment names its tool instead
(a line break, ESC, U+202E…), and a call whose arguments hold ``error`` is answered with a JSON-RPC
error carrying that text as its message. A call whose arguments hold ``flood`` (a number of bytes) is
answered with the start of a message that long and never ended: no newline, and the server then waits
for ever, so only term2's bound on a line can end it. One whose arguments hold ``garbage`` (a number of
lines) is preceded by that many short lines that are not JSON, then answered as usual.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

LONE = "lone \ud800 and \udc00, pair \U0001f600"  # json.dumps writes \ud800, \udc00 and \ud83d\ude00
TOOL = os.environ.get("RAW_TOOL", "lone")


def _answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, request_id = request.get("method"), request.get("id")
    if request_id is None:
        return None  # a notification
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-mcp", "version": "1"},
        }
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        result = {"tools": [{"name": TOOL, "description": f"Says: {LONE}", "inputSchema": schema}]}
    elif method == "tools/call":
        arguments = request["params"].get("arguments", {})
        if "flood" in arguments:
            _flood(request_id, int(arguments["flood"]))
        if "garbage" in arguments:
            sys.stdout.write("x\n" * int(arguments["garbage"]))
        if "error" in arguments:
            return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": arguments["error"]}}
        text = arguments.get("text", "")
        result = {"content": [{"type": "text", "text": f"{text}: {LONE}"}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _flood(request_id: object, size: int) -> None:
    out = sys.stdout.buffer
    out.write(json.dumps({"jsonrpc": "2.0", "id": request_id}).encode()[:-1] + b', "result": {"x": "')
    block = b"x" * (1024 * 1024)
    for _ in range(size // len(block)):
        out.write(block)
    out.flush()
    while True:
        time.sleep(3600)


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = _answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")  # ensure_ascii: the lone surrogates go out escaped
            sys.stdout.flush()


if __name__ == "__main__":
    main()
