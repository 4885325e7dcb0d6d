"""MCP calls through term2's tool gate, with the in-memory MCP adapter: asked every time, once at most."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
import pytest

from term2.app.mcp.servers import McpLimits, McpSessions
from term2.app.mcp.toolbox import session_toolbox
from term2.app.tools import WorkspaceToolbox
from term2.domain.approval import Choice
from term2.domain.history import ToolStatus
from term2.domain.workspace import SessionAccess
from term2.ports.approval import ApprovalDecision
from term2.ports.llm import ToolCallRequest
from term2.ports.mcp import StdioServer
from term2.ports.tools import Toolbox, ToolContext
from term2.ports.updates import SessionEvent, ToolCallChanged
from tests.fakes.approvers import FixedApprover
from tests.fakes.mcp_clients import FakeMcpClient, FakeServer, standard_server
from tests.fakes.sandboxes import CannedSandbox
from tests.fakes.turns import live_turn

pytestmark = pytest.mark.anyio


class World:
    def __init__(self, root: Path, server: FakeServer, call_timeout: float = 0.5) -> None:
        self.server = server
        self.client = FakeMcpClient({"fake": server})
        self.mcp = McpSessions(lambda: self.client, McpLimits(startup_timeout=60, call_timeout=call_timeout))
        self.approver = FixedApprover()
        self.events: list[SessionEvent] = []
        self.notices: list[str] = []
        self.access = SessionAccess(str(root))
        self.turn = live_turn()

    def ctx(self) -> ToolContext:
        async def emit(event: SessionEvent) -> None:
            self.events.append(event)

        async def record(_: object) -> None:
            pass

        return ToolContext("s1", self.access, self.approver, CannedSandbox(), emit, record, self.turn)

    async def notify(self, text: str) -> None:
        self.notices.append(text)

    async def toolbox(self) -> Toolbox:
        return await session_toolbox(WorkspaceToolbox(), self.mcp.servers("s1"))

    async def call(self, name: str, **args: object) -> str:
        toolbox = await self.toolbox()
        return await toolbox.execute(ToolCallRequest("call_1", name, json.dumps(args)), self.ctx())

    def statuses(self) -> list[ToolStatus]:
        return [e.call.status for e in self.events if isinstance(e, ToolCallChanged)]


@asynccontextmanager
async def opened(tmp_path: Path, call_timeout: float = 0.5) -> AsyncIterator[World]:
    made = World(tmp_path, standard_server(), call_timeout)
    async with anyio.create_task_group() as tg:
        await tg.start(made.mcp.run)
        await made.mcp.open("s1", str(tmp_path), [StdioServer("fake", "unused")], made.notify)
        yield made
        await made.mcp.close("s1")
        tg.cancel_scope.cancel()


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with opened(tmp_path) as made:
        yield made


async def test_tools_are_offered_after_the_built_in_ones(world: World) -> None:
    names = [spec.name for spec in (await world.toolbox()).specs()]
    assert names[: len(WorkspaceToolbox().specs())] == [s.name for s in WorkspaceToolbox().specs()]
    assert names[-4:] == ["mcp__fake__echo", "mcp__fake__fail", "mcp__fake__slow", "mcp__fake__grow"]


async def test_every_call_is_asked_with_allow_once_or_reject_only(world: World) -> None:
    assert await world.call("mcp__fake__echo", text="hi") == "echo: hi"
    assert await world.call("mcp__fake__echo", text="again") == "echo: again"  # asked again: nothing remembered
    assert len(world.approver.requests) == 2
    request = world.approver.requests[0]
    assert [o.choice for o in request.options] == [Choice.ALLOW_ONCE, Choice.REJECT]
    assert "'fake'" in request.title and "'echo'" in request.title
    assert '"text": "hi"' in request.description
    assert world.server.calls == [("echo", {"text": "hi"}), ("echo", {"text": "again"})]


async def test_a_rejected_call_never_reaches_the_server(world: World) -> None:
    world.approver.answer = ApprovalDecision(Choice.REJECT)
    result = await world.call("mcp__fake__echo", text="secret")
    assert "rejected" in result and world.server.calls == []
    assert world.statuses()[-1] is ToolStatus.FAILED


async def test_an_allow_always_answer_is_not_offered_and_runs_nothing(world: World) -> None:
    world.approver.answer = ApprovalDecision(Choice.ALLOW_FOLDER_SESSION)
    result = await world.call("mcp__fake__echo", text="x")
    assert "unknown_option" in result and world.server.calls == []


async def test_tool_errors_timeouts_and_a_dead_server_are_errors_the_model_reads(world: World) -> None:
    assert (await world.call("mcp__fake__fail")).startswith("Error: the tool reported a failure")
    assert world.statuses()[-1] is ToolStatus.FAILED
    timed_out = await world.call("mcp__fake__slow", seconds=1e6)  # ends by the call timeout only
    assert "mcp_call_timeout" in timed_out
    toolbox = await world.toolbox()
    world.server.hang_up()
    with anyio.fail_after(120):  # a guard against a hang only
        while not world.notices:
            await anyio.sleep(0.01)
    assert "'fake' stopped" in world.notices[0]
    result = await toolbox.execute(ToolCallRequest("call_2", "mcp__fake__echo", '{"text": "x"}'), world.ctx())
    assert result.startswith("Error:")
    assert all(not s.name.startswith("mcp__") for s in toolbox.specs())


async def test_a_cancelled_turn_cancels_the_call_at_the_server(tmp_path: Path) -> None:
    # Cancelled once the server has the call (not after a delay a busy machine may spend before it gets
    # there), with no call timeout that could end the call first.
    async with opened(tmp_path, call_timeout=1e6) as world, anyio.create_task_group() as tasks:
        tasks.start_soon(partial(world.call, "mcp__fake__slow", seconds=1e6))
        while not world.server.calls:
            await anyio.sleep(0.01)
        tasks.cancel_scope.cancel()
    assert world.server.cancelled == ["slow"]
    assert world.statuses()[-1] is ToolStatus.CANCELLED


async def test_list_changed_updates_the_specs(world: World) -> None:
    toolbox = await world.toolbox()
    before = [s.name for s in toolbox.specs()]
    assert [s.name for s in toolbox.specs()] == before  # stable while nothing changes
    await world.call("mcp__fake__grow")
    with anyio.fail_after(60):
        while "mcp__fake__extra" not in [s.name for s in toolbox.specs()]:
            await anyio.sleep(0.01)


async def test_a_server_that_fails_to_start_is_told_and_leaves_no_tools(tmp_path: Path) -> None:
    broken = FakeServer(fail_start="exec failed")
    made = World(tmp_path, broken)
    async with anyio.create_task_group() as tg:
        await tg.start(made.mcp.run)
        await made.mcp.open("s1", str(tmp_path), [StdioServer("fake", "unused")], made.notify)
        toolbox = await made.toolbox()
        assert all(not s.name.startswith("mcp__") for s in toolbox.specs())
        assert made.notices and "'fake' could not be started" in made.notices[0]
        tg.cancel_scope.cancel()


async def test_closing_the_session_ends_its_servers(world: World) -> None:
    await world.mcp.close("s1")
    assert world.server.closed and world.mcp.servers("s1") is None
