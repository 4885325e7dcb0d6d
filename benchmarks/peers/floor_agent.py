"""The floor: the least a Python ACP agent can do to reach a first reply, for the peers table.

Not term2 and not an agent: it answers `initialize` and `session/new` from
constants, and on `session/prompt` makes one real streaming Chat Completions
request with httpx on asyncio and forwards the first content delta as an
`agent_message_chunk`. `--libs` names extra libraries to import before the
first line is read, so the harness can show what the interpreter, asyncio and
httpx cost by themselves and what each library of term2's stack adds, in the
same run as the peers (bench_peers.py's presets `floor` and `floor-stack`).

Optional parts are hidden the way term2's launcher hides them (no click, rich,
h2, pydantic-settings or yaml), so the floor is not made heavier than term2.
"""

from __future__ import annotations

import sys

for _optional in ("h2", "click", "rich", "pygments", "pydantic_settings", "yaml"):
    sys.modules[_optional] = None  # type: ignore[assignment]

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import httpx  # noqa: E402

STACK = ("anyio", "anyio._backends._asyncio", "pydantic.main", "structlog", "dependency_injector.containers", "sqlite3")


def _reply(message_id: object, result: object) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n").encode()


async def _first_delta(client: httpx.AsyncClient, text: str) -> str:
    body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": text}]}
    async with client.stream("POST", "/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                choices = json.loads(line[6:]).get("choices") or [{}]
                content = choices[0].get("delta", {}).get("content")
                if content:
                    return str(content)
    return ""


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer
    base = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    headers = {"authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'sk-floor')}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        while line := await reader.readline():
            message = json.loads(line)
            method, message_id = message.get("method"), message.get("id")
            if method == "initialize":
                out.write(_reply(message_id, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}))
            elif method == "session/new":
                out.write(_reply(message_id, {"sessionId": "floor"}))
            elif method == "session/prompt":
                text = message["params"]["prompt"][0].get("text", "")
                chunk = {"content": {"type": "text", "text": await _first_delta(client, text)}}
                update = {"sessionId": "floor", "update": {"sessionUpdate": "agent_message_chunk", **chunk}}
                notification = {"jsonrpc": "2.0", "method": "session/update", "params": update}
                out.write((json.dumps(notification) + "\n").encode())
                out.write(_reply(message_id, {"stopReason": "end_turn"}))
            elif message_id is not None:
                out.write(_reply(message_id, {}))
            out.flush()


def main() -> None:
    if sys.argv[1:3] == ["--libs", "stack"]:
        import importlib

        for name in STACK:
            importlib.import_module(name)
    asyncio.run(_serve())


if __name__ == "__main__":
    main()
