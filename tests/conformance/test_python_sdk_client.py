"""The official Python SDK (``agent-client-protocol``, import name ``acp``) holds
a whole ACP v1 conversation with a real ``term2 acp``, backed by the fake LLM.

The SDK spawns the agent itself (``acp.spawn_agent_process``), but the command
it spawns is our relay (``tests/support/acp_tee.py``) around
``python -m term2 acp``: every line in both directions lands in a transcript,
and every line term2 wrote is validated against the official v1 JSON schema.
The scenario mirrors ``test_sdk_clients_term2.py``: initialize, session/new,
session/list, a streamed prompt, a write outside the workspace allowed and
rejected through ``session/request_permission``, cancel during a slow stream
and while a permission request is pending, session/close, and session/load
(whose replay arrives as session updates before the response).
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any, cast

import acp
import pytest
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
)

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer
from tests.support.schemas import iter_transcript, validate_all

TEE = Path(__file__).resolve().parents[1] / "support" / "acp_tee.py"
LONG_TEXT = " ".join(f"word{i}" for i in range(200))
SDK_VERSION = "0.12.1"
PROMPTS = [
    "say hello",
    "write outside the project (allowed)",
    "write outside the project (rejected)",
    "a long answer",
    "ask permission, then cancel",
]


class RecordingClient:
    """An ``acp.Client``: records session updates, answers permissions from a script.

    ``answers`` holds one entry per expected permission request: an option
    kind to select (``allow_once``, ``reject_once``) or ``"cancelled"``, which
    waits for the test to cancel the turn and then answers ``cancelled`` as
    the protocol requires.
    """

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[tuple[list[PermissionOption], str]] = []
        self.first_chunk = asyncio.Event()
        self.permission_pending = asyncio.Event()
        self.turn_cancelled = asyncio.Event()

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        answer = self.answers.pop(0)
        self.permission_requests.append((options, answer))
        if answer == "cancelled":
            self.permission_pending.set()
            await self.turn_cancelled.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        option = next(o for o in options if o.kind == answer)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        if isinstance(update, AgentMessageChunk):
            self.first_chunk.set()

    def mark(self) -> int:
        return len(self.updates)

    def text_since(self, mark: int) -> str:
        return "".join(
            u.content.text
            for _, u in self.updates[mark:]
            if isinstance(u, AgentMessageChunk) and isinstance(u.content, TextContentBlock)
        )

    def chunks_since(self, mark: int) -> int:
        return sum(isinstance(u, AgentMessageChunk) for _, u in self.updates[mark:])

    def tool_statuses_since(self, mark: int) -> list[str | None]:
        return [u.status for _, u in self.updates[mark:] if isinstance(u, ToolCallProgress)]


def _text(prompt: str) -> list[Any]:
    return [acp.text_block(prompt)]


async def _conversation(
    client: RecordingClient, env: dict[str, str], workspace: Path, outside: Path, transcript: Path, stderr: Any
) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    command = [str(TEE), "--transcript", str(transcript), "--", sys.executable, "-m", "term2", "acp"]
    async with acp.spawn_agent_process(
        cast(acp.Client, client), sys.executable, *command, env=env, cwd=workspace, transport_kwargs={"stderr": stderr}
    ) as (conn, _process):
        init = await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="pytest-python-sdk", version=SDK_VERSION),
        )
        seen["initialize"] = init
        caps = init.agent_capabilities
        assert init.protocol_version == 1
        assert caps is not None and caps.load_session is True
        assert caps.session_capabilities is not None
        assert caps.session_capabilities.list is not None and caps.session_capabilities.close is not None

        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        seen["session_id"] = sid

        listing = await conn.list_sessions()
        mine = [s for s in listing.sessions if s.session_id == sid]
        assert mine and mine[0].cwd == str(workspace), listing

        # A streamed answer.
        mark = client.mark()
        result = await conn.prompt(session_id=sid, prompt=_text(PROMPTS[0]))
        assert result.stop_reason == "end_turn"
        assert client.text_since(mark) == "Hello world"
        assert client.chunks_since(mark) >= 2, "the answer should arrive in several chunks"

        # A write outside the workspace needs permission: allowed, then rejected.
        mark = client.mark()
        result = await conn.prompt(session_id=sid, prompt=_text(PROMPTS[1]))
        assert result.stop_reason == "end_turn"
        assert (outside / "allowed.txt").read_text() == "allowed.txt"
        assert client.tool_statuses_since(mark)[-1] == "completed"
        assert client.text_since(mark) == "wrote it"

        mark = client.mark()
        result = await conn.prompt(session_id=sid, prompt=_text(PROMPTS[2]))
        assert result.stop_reason == "end_turn"
        assert not (outside / "rejected.txt").exists()
        assert client.tool_statuses_since(mark)[-1] == "failed"

        # Cancel during a slow stream.
        mark = client.mark()
        client.first_chunk.clear()
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=_text(PROMPTS[3])))
        await asyncio.wait_for(client.first_chunk.wait(), 60)
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(turn, 30)
        assert result.stop_reason == "cancelled"
        partial = client.text_since(mark)
        assert partial.startswith("word0") and len(partial) < len(LONG_TEXT)

        # Cancel while a permission request is pending: the client answers `cancelled`.
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=_text(PROMPTS[4])))
        await asyncio.wait_for(client.permission_pending.wait(), 60)
        await conn.cancel(session_id=sid)
        client.turn_cancelled.set()
        result = await asyncio.wait_for(turn, 30)
        assert result.stop_reason == "cancelled"
        assert not (outside / "cancelled.txt").exists()

        closed = await conn.close_session(session_id=sid)
        assert closed is None or closed.model_dump(exclude_none=True) == {}

        # session/load replays the conversation as session updates, then answers.
        mark = client.mark()
        await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        # Notifications are dispatched as tasks: let the ones read before the response finish.
        for _ in range(100):
            if client.text_since(mark).startswith("Hello world"):
                break
            await asyncio.sleep(0.05)
        replayed = client.updates[mark:]
        seen["replay_user"] = [u.content.text for _, u in replayed if isinstance(u, UserMessageChunk)]
        seen["replay_agent"] = client.text_since(mark)
        seen["replay_tools"] = [(u.tool_call_id, u.status) for _, u in replayed if isinstance(u, ToolCallStart)]
        seen["replay_session_ids"] = {s for s, _ in client.updates[mark:]}
    return seen


def _script(outside: Path) -> list[dict[str, Any]]:
    def write(name: str) -> dict[str, Any]:
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": str(outside / name), "content": name}}]}

    return [
        {"text": "Hello world"},
        write("allowed.txt"),
        {"text": "wrote it"},
        write("rejected.txt"),
        {"text": "could not write it"},
        {"text": LONG_TEXT, "chunk_delay": 0.05},
        write("cancelled.txt"),
    ]


@pytest.mark.timeout(180)
def test_python_sdk_client_full_conversation(tmp_path: Path, workspace: Path, fake_llm: FakeLLMServer) -> None:
    assert dist_version("agent-client-protocol") == SDK_VERSION
    outside = tmp_path / "outside"
    outside.mkdir()
    fake_llm.push(*_script(outside))
    # spawn_agent_process starts from a trimmed environment (HOME, PATH, ...) plus this.
    env = dict(llm_env(fake_llm))
    env.update(
        {
            "TERM2_HOME": str(tmp_path / "home"),
            "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    transcript = tmp_path / "python-sdk-v1.jsonl"
    stderr_path = tmp_path / "term2-stderr.log"
    client = RecordingClient(["allow_once", "reject_once", "cancelled"])

    async def main() -> dict[str, Any]:
        with stderr_path.open("wb") as stderr:
            return await asyncio.wait_for(_conversation(client, env, workspace, outside, transcript, stderr), 150)

    try:
        seen = asyncio.run(main())
    except BaseException:
        print("term2 stderr tail:\n" + stderr_path.read_text(errors="replace")[-4000:])
        raise

    assert [answer for _, answer in client.permission_requests] == ["allow_once", "reject_once", "cancelled"]
    assert seen["replay_session_ids"] == {seen["session_id"]}
    assert seen["replay_user"] == PROMPTS, seen["replay_user"]
    assert seen["replay_agent"].startswith("Hello worldwrote itcould not write itword0"), seen["replay_agent"]
    assert [status for _, status in seen["replay_tools"]] == ["completed", "failed", "failed"], seen["replay_tools"]

    # The wire, as the relay saw it.
    messages = [(d, json.loads(line)) for d, line in iter_transcript(transcript)]
    recorder = validate_all(1, messages)
    assert recorder.pending == {}
    assert recorder.validated > 20

    # session/load: the replay is on the wire after the request and before its response.
    load = next(m for d, m in messages if d == "client" and m.get("method") == "session/load")
    start = messages.index(("client", load))
    end = next(i for i, (d, m) in enumerate(messages) if d == "agent" and m.get("id") == load["id"] and i > start)
    replay = [
        m["params"]["update"]["sessionUpdate"]
        for d, m in messages[start:end]
        if d == "agent" and m.get("method") == "session/update"
    ]
    assert "user_message_chunk" in replay and "agent_message_chunk" in replay, replay
    after = [
        m["params"]["update"]["sessionUpdate"]
        for d, m in messages[end + 1 :]
        if d == "agent" and m.get("method") == "session/update"
    ]
    assert set(after) <= {"available_commands_update"}, f"replayed after the session/load response: {after}"
