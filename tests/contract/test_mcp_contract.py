"""The MCP port's contract, run against the SDK adapter (a real stdio server) and the in-memory one.

What the application relies on: tools listed with their schemas, results and
tool errors as values, start failures and hang-ups as `McpError` of the right
kind, `on_closed` when a server goes away, `on_tools_changed` when its tools
change, a per-call timeout, and a cancelled call cancelled at the server.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from term2.adapters.mcp.sdk_client import SdkMcpClient
from term2.ports.mcp import McpClient, McpConnection, McpError, StdioServer, TextPart
from tests.fakes.mcp_clients import FakeMcpClient, FakeServer, standard_server
from tests.support.procs import processes_with

pytestmark = pytest.mark.anyio
REPO = str(Path(__file__).resolve().parents[2])


GUARD = 120  # seconds: a guard against a hang only; each wait ends on what it waits for


@dataclass
class Adapter:
    client: McpClient
    server: StdioServer
    kill: Callable[[], None]  # the server dies under the connection
    cancelled: Callable[[], bool]  # the server saw a call cancelled
    changed: list[str]
    closed: list[str]
    started: Callable[[], bool] = lambda: False  # the server has a call of `slow`

    def connect(self, server: StdioServer | None = None) -> AbstractAsyncContextManager[McpConnection]:
        return self.client.connect(
            server or self.server,
            cwd=REPO,
            startup_timeout=20,
            on_tools_changed=lambda: self.changed.append("changed"),
            on_closed=lambda _why: self.closed.append("closed"),
        )


def _sdk(tmp_path: Path) -> Adapter:
    import os
    import signal
    import uuid

    record, marker = tmp_path / "calls.jsonl", f"mcp-contract-{uuid.uuid4().hex}"
    args = ("-m", "tests.fakes.mcp_server", "--record", str(record), "--marker", marker)
    server = StdioServer("fake", sys.executable, args, (("PYTHONPATH", REPO),))

    def kill() -> None:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)

    def noted() -> list[dict[str, object]]:
        lines = record.read_text().splitlines() if record.exists() else []
        return [json.loads(line) for line in lines]

    def cancelled() -> bool:
        return any(line.get("cancelled") for line in noted())

    def started() -> bool:
        return any(line.get("tool") == "slow" for line in noted())

    return Adapter(SdkMcpClient(), server, kill, cancelled, [], [], started)


def _fake(_: Path) -> Adapter:
    server: FakeServer = standard_server()
    return Adapter(
        FakeMcpClient({"fake": server}),
        StdioServer("fake", "unused"),
        server.hang_up,
        lambda: bool(server.cancelled),
        [],
        [],
        lambda: any(name == "slow" for name, _ in server.calls),
    )


@pytest.fixture(params=[_sdk, _fake], ids=["sdk", "fake"])
def adapter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Adapter]:
    yield request.param(tmp_path)


@asynccontextmanager
async def connected(adapter: Adapter) -> AsyncIterator[McpConnection]:
    async with adapter.connect() as connection:
        yield connection


async def test_tools_are_listed_with_their_schemas(adapter: Adapter) -> None:
    async with connected(adapter) as connection:
        tools = {tool.name: tool for tool in await connection.list_tools()}
    assert {"echo", "fail", "slow", "grow"} <= set(tools)
    assert tools["echo"].input_schema["properties"]["text"]["type"] == "string"  # type: ignore[index]
    assert tools["echo"].description == "Echo the text back."


async def test_results_and_tool_errors_are_values(adapter: Adapter) -> None:
    async with connected(adapter) as connection:
        result = await connection.call_tool("echo", {"text": "hi"}, 10)
        assert result.parts == (TextPart("echo: hi"),) and not result.is_error
        failed = await connection.call_tool("fail", {}, 10)
        assert failed.is_error and "broken on purpose" in failed.parts[0].text  # type: ignore[union-attr]


async def test_a_server_that_cannot_start_raises_start(adapter: Adapter, tmp_path: Path) -> None:
    missing = StdioServer("missing", str(tmp_path / "no-such-server"))
    with pytest.raises(McpError) as caught:
        async with adapter.connect(missing):
            pass
    assert caught.value.kind == "start"


async def test_a_call_past_its_timeout_raises_timeout(adapter: Adapter) -> None:
    async with connected(adapter) as connection:
        with pytest.raises(McpError) as caught:
            await connection.call_tool("slow", {"seconds": 1e6}, 0.3)  # ends by the timeout only
    assert caught.value.kind == "timeout"


async def test_a_cancelled_call_is_cancelled_at_the_server(adapter: Adapter) -> None:
    # Cancelled once the server has the call, not after a delay a busy machine may spend before it gets there.
    async with connected(adapter) as connection:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(connection.call_tool, "slow", {"seconds": 1e6}, 1e6)
            with anyio.fail_after(GUARD):
                while not adapter.started():
                    await anyio.sleep(0.02)
            tasks.cancel_scope.cancel()
        with anyio.fail_after(GUARD):
            while not adapter.cancelled():
                await anyio.sleep(0.05)


async def test_a_changed_tool_list_is_told(adapter: Adapter) -> None:
    async with connected(adapter) as connection:
        await connection.call_tool("grow", {}, 10)
        with anyio.fail_after(GUARD):
            while not adapter.changed:
                await anyio.sleep(0.02)
        assert "extra" in {tool.name for tool in await connection.list_tools()}


async def test_a_server_that_dies_is_told_and_its_calls_raise_closed(adapter: Adapter) -> None:
    async with connected(adapter) as connection:
        await connection.call_tool("echo", {"text": "alive"}, 10)
        adapter.kill()
        with anyio.fail_after(GUARD):
            while not adapter.closed:
                await anyio.sleep(0.02)
        with pytest.raises(McpError) as caught:
            await connection.call_tool("echo", {"text": "dead"}, 10)
    assert caught.value.kind == "closed"


async def test_lone_surrogates_a_server_escapes_arrive_mended_and_a_pair_whole() -> None:
    """The SDK's JSON parser refuses `"\\ud800"`: the result was lost and the call waited for its timeout.
    The adapter reads such a message again, each lone surrogate U+FFFD; a valid pair stays 😀."""
    server = StdioServer("raw", sys.executable, ("-m", "tests.fakes.mcp_raw_server"), (("PYTHONPATH", REPO),))
    expected = "lone \ufffd and \ufffd, pair \U0001f600"
    adapter = Adapter(SdkMcpClient(), server, lambda: None, lambda: False, [], [])
    async with adapter.connect() as connection:
        [tool] = await connection.list_tools()
        assert tool.description == f"Says: {expected}"
        with anyio.fail_after(15):
            result = await connection.call_tool("lone", {"text": "hi"}, 10)
    assert result.parts == (TextPart(f"hi: {expected}"),) and not result.is_error
    for part in result.parts:
        assert isinstance(part, TextPart)
        part.text.encode("utf-8")  # what the store and the wire take
