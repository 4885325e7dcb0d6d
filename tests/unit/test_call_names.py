"""Issue 18, item 7: term2 names tool calls, not the model (ADR 0021).

A model that gives a call an id it already used (in the same response, in an
earlier turn, or one term2 made) must not make that call replace another one
in the history, the client's view or the run_code log; and the transcript sent
back to the provider must still pair every call with its own result.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from dependency_injector import providers

from term2.adapters.llm.scripted import ScriptedProvider, text_response, tool_call_response
from term2.adapters.sandbox.scripted import Script, ScriptedSandbox
from term2.adapters.store.memory_store import InMemorySessionStore
from term2.app.call_names import CallNamer
from term2.app.config import Settings
from term2.app.entrypoints.container import Container, build_container
from term2.app.replay import replay_event
from term2.app.tools.run_code_program import launcher_command
from term2.domain.content import TextBlock
from term2.domain.history import HistoryEntry, ToolCall, ToolStatus
from term2.domain.transcript import ChatMessage, ModelMessage, ToolCallRequest
from term2.ports.llm import CompletionRequest
from term2.ports.updates import ToolCallChanged
from tests.fakes.approvers import ALLOWED_ONCE, FixedApprover
from tests.fakes.sinks import RecordingSink

pytestmark = pytest.mark.anyio

WIRE_ID = re.compile(r"[A-Za-z0-9]{9}")


class Session:
    """One session of the real container, its edges swapped for scripted ones, prompted turn after turn."""

    def __init__(self, root: Path, llm: ScriptedProvider, sandbox: ScriptedSandbox | None = None) -> None:
        self.root, self.llm = root, llm
        self.container: Container = build_container(Settings(model="openai/fake", max_turn_requests=5), {})
        self.container.store.override(providers.Singleton(InMemorySessionStore))
        self.container.llm.override(providers.Object(llm))
        self.container.sandbox.override(providers.Object(sandbox or ScriptedSandbox()))
        self.session_id = ""
        self.sinks: list[RecordingSink] = []

    async def prompt(self, text: str) -> RecordingSink:
        if not self.session_id:
            self.session_id = (await self.container.sessions().new(str(self.root))).session.session_id
        prompts = self.container.prompts()
        sink = RecordingSink()
        await prompts.run(prompts.admit(self.session_id), (TextBlock(text),), sink, FixedApprover(ALLOWED_ONCE))
        self.sinks.append(sink)
        return sink

    async def history(self) -> list[HistoryEntry]:
        return [e async for e in self.container.store().history(self.session_id)]

    async def calls(self) -> list[ToolCall]:
        return [e for e in await self.history() if isinstance(e, ToolCall)]


def live_ids(sink: RecordingSink) -> set[str]:
    return {e.call.tool_call_id for e in sink.events if isinstance(e, ToolCallChanged)}


def assert_provider_would_accept(request: CompletionRequest) -> None:
    """Every call id once in the whole request (Anthropic's rule), each answered by its own result, in order."""
    ids = [c.call_id for m in request.messages for c in m.tool_calls]
    assert len(ids) == len(set(ids)), ids
    assert all(ids), ids
    messages = list(request.messages)
    for i, message in enumerate(messages):
        if message.tool_calls:
            answers = [m.tool_call_id for m in messages[i + 1 : i + 1 + len(message.tool_calls)]]
            assert answers == [c.call_id for c in message.tool_calls], (answers, message.tool_calls)


def write(path: str, content: str) -> str:
    return json.dumps({"path": path, "content": content})


async def test_an_id_reused_in_a_later_turn_keeps_both_calls_in_the_history_and_the_view(tmp_path: Path) -> None:
    llm = ScriptedProvider(
        [
            tool_call_response(("dup", "write_file", write("notes.txt", "hello\n"))),
            text_response("written"),
            tool_call_response(("dup", "run_shell", json.dumps({"command": "make test"}))),
            text_response("ran"),
        ]
    )
    session = Session(tmp_path, llm)
    first = await session.prompt("write the notes")
    second = await session.prompt("run the tests")

    calls = await session.calls()
    assert [(c.title.split()[0], c.status) for c in calls] == [
        ("Write", ToolStatus.COMPLETED),
        ("Run", ToolStatus.FAILED),  # the scripted sandbox knows no `make`: exit 127, but the call ran
    ], calls
    write_id, shell_id = (c.tool_call_id for c in calls)
    assert write_id != shell_id and "dup" not in (write_id, shell_id)
    replayed = [replay_event(c) for c in calls]
    assert [e.call.tool_call_id for e in replayed if isinstance(e, ToolCallChanged)] == [write_id, shell_id]
    # The live view: the second turn's updates name a call the first turn's never did.
    assert live_ids(first) == {write_id} and live_ids(second) == {shell_id}
    # The model still sees its own id where nothing else used it, and its conversation stays valid.
    assert_provider_would_accept(llm.requests[-1])
    sent = [c.call_id for m in llm.requests[-1].messages for c in m.tool_calls]
    assert sent[0] == "dup" and WIRE_ID.fullmatch(sent[1])


async def test_two_calls_with_one_id_in_one_response_both_run_and_both_are_answered(tmp_path: Path) -> None:
    llm = ScriptedProvider(
        [
            tool_call_response(("x", "write_file", write("a.txt", "A\n")), ("x", "write_file", write("b.txt", "B\n"))),
            text_response("both"),
        ]
    )
    session = Session(tmp_path, llm)
    await session.prompt("write two files")

    assert (tmp_path / "a.txt").read_text() == "A\n" and (tmp_path / "b.txt").read_text() == "B\n"
    calls = await session.calls()
    assert len(calls) == 2 and len({c.tool_call_id for c in calls}) == 2
    assert all(c.status is ToolStatus.COMPLETED for c in calls)
    follow_up = llm.requests[1]
    assert_provider_would_accept(follow_up)
    assistant = next(m for m in follow_up.messages if m.tool_calls)
    assert assistant.tool_calls[0].call_id == "x" and WIRE_ID.fullmatch(assistant.tool_calls[1].call_id)
    results = [m.content for m in follow_up.messages if m.role == "tool"]
    assert len(results) == 2 and "a.txt" in results[0] and "b.txt" in results[1]


async def test_an_empty_id_is_named_in_the_history_and_in_the_transcript(tmp_path: Path) -> None:
    llm = ScriptedProvider([tool_call_response(("", "write_file", write("a.txt", "A\n"))), text_response("ok")])
    session = Session(tmp_path, llm)
    await session.prompt("write")

    [call] = await session.calls()
    assert call.tool_call_id.startswith("call_") and call.status is ToolStatus.COMPLETED
    assert_provider_would_accept(llm.requests[1])


async def test_a_model_that_names_a_call_with_a_term2_id_gets_a_call_of_its_own(tmp_path: Path) -> None:
    llm = ScriptedProvider([tool_call_response(("c1", "write_file", write("a.txt", "A\n"))), text_response("ok")])
    session = Session(tmp_path, llm)
    await session.prompt("write")
    [first] = await session.calls()
    forged = first.tool_call_id  # as if the model had learned it, and tried to overwrite that call
    llm.push(tool_call_response((forged, "write_file", write("b.txt", "B\n"))), text_response("ok"))
    await session.prompt("again")

    calls = await session.calls()
    assert calls[0] == first, "the earlier call's record was replaced"
    assert len(calls) == 2 and calls[1].tool_call_id != forged
    assert_provider_would_accept(llm.requests[-1])


async def test_run_code_names_its_nested_calls_after_term2s_id_for_the_parent(tmp_path: Path) -> None:
    def program(sock: socket.socket) -> bytes:
        file = sock.makefile("rb")
        for request in ({"id": 1, "tool": "__program__"}, {"id": 2, "tool": "list_dir", "args": {}}):
            sock.sendall(json.dumps(request).encode() + b"\n")
            assert json.loads(file.readline())["ok"]
        return b"listed\n"

    sandbox = ScriptedSandbox()
    sandbox.add(launcher_command(), Script(program=program))
    run = ("dup", "run_code", json.dumps({"code": "print(1)\n"}))
    llm = ScriptedProvider(
        [tool_call_response(run), text_response("one"), tool_call_response(run), text_response("two")]
    )
    session = Session(tmp_path, llm, sandbox)
    await session.prompt("run it")
    await session.prompt("run it again")

    calls = await session.calls()
    parents = [c for c in calls if c.parent_id is None]
    nested = [c for c in calls if c.parent_id is not None]
    assert len(parents) == 2 and len({c.tool_call_id for c in parents}) == 2
    assert [c.parent_id for c in nested] == [p.tool_call_id for p in parents]
    assert [c.tool_call_id for c in nested] == [f"{p.tool_call_id}.1" for p in parents]
    assert all(c.status is ToolStatus.COMPLETED for c in calls)


def test_the_namer_keeps_the_providers_id_only_when_it_can_go_back() -> None:
    earlier = ModelMessage("m1", ChatMessage("assistant", "", (ToolCallRequest("old", "read_file", "{}"),)))
    namer = CallNamer([earlier])
    named = [namer.name(ToolCallRequest(cid, "read_file", "{}")) for cid in ("new", "new", "", "old")]
    sent = [n.sent.call_id for n in named]
    assert sent[0] == "new" and all(WIRE_ID.fullmatch(s) for s in sent[1:])
    assert len(set(sent)) == 4
    ours = [n.call.call_id for n in named]
    assert len(set(ours)) == 4 and all(o.startswith("call_") for o in ours)
    assert all(n.sent.name == n.call.name == "read_file" for n in named)
