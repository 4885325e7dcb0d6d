"""Issue 18, item 7, end to end: a model reusing a tool call id overwrites nothing (ADR 0021).

A real `term2 acp` on the native Anthropic wire, against the fake that refuses
what Anthropic refuses (a `tool_use` id twice in one conversation among it).
The model names its first call `toolu_dup`; after the process is replaced and
the session resumed, it names two more calls the same in one response (an
approved `run_shell` and a `read_file`). Each must keep a call of its own in
the client's live view, in a v2 replay and in a v1 `session/load`; and the
conversation sent back must still be one Anthropic accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.test_native_wires_e2e import anthropic_env, model_requests
from tests.e2e.test_prompts import FIRST_TURN_TIMEOUT, idle_update, make_workspace
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, updates

Message = dict[str, Any]
REUSED = "toolu_dup"


def allow_once(_params: Message) -> Message:
    return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}


def view(*batches: list[Message]) -> dict[str, Message]:
    """What a client keeps of the tool calls: one entry per toolCallId, later updates merged in."""
    calls: dict[str, Message] = {}
    for messages in batches:
        for update in updates(messages):
            if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
                calls.setdefault(update["toolCallId"], {}).update(update)
    return calls


def test_a_reused_tool_call_id_keeps_every_call_live_replayed_and_loaded(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    notes = workspace / "notes.txt"
    home = tmp_path / "home"
    with start_fake_llm(require_key="sk-ant-test") as llm:
        env = anthropic_env(llm)
        llm.push(
            {
                "thought": "Write the notes.",
                "tool_calls": [
                    {"id": REUSED, "name": "write_file", "arguments": {"path": str(notes), "content": "hi\n"}}
                ],
            },
            {"thought": "Done.", "text": "The notes are written."},
        )
        a = AcpProcess(tmp_path, env=env, home=home)
        try:
            a.initialize(2)
            sid = a.new_session(workspace)
            _ack, first = a.prompt_v2(sid, "Write the notes", timeout=FIRST_TURN_TIMEOUT)
            assert idle_update(first)["stopReason"] == "end_turn", a.stderr()[-3000:]
            assert a.close() == 0
            a.validate_schemas()
        finally:
            a.kill()

        llm.push(
            {
                "thought": "Test, and read them back.",
                "tool_calls": [
                    {"id": REUSED, "name": "run_shell", "arguments": {"command": "echo tested"}},
                    {"id": REUSED, "name": "read_file", "arguments": {"path": "notes.txt"}},
                ],
            },
            {"thought": "Fine.", "text": "Tested and read."},
        )
        b = AcpProcess(tmp_path, env=env, home=home, permission=allow_once)
        try:
            b.initialize(2)
            start = {"sessionId": sid, "cwd": str(workspace), "replayFrom": {"type": "start"}}
            assert b.result("session/resume", start) == {}
            replayed = list(b.log)
            _ack, second = b.prompt_v2(sid, "Run the tests", timeout=FIRST_TURN_TIMEOUT)
            assert idle_update(second)["stopReason"] == "end_turn", b.stderr()[-3000:]
            assert len(b.permission_requests) == 1  # the shell command was asked about and approved
            assert b.close() == 0
            b.validate_schemas()
        finally:
            b.kill()

        c = AcpProcess(tmp_path, home=home, env=env)
        try:
            c.initialize(1)
            assert set(c.result("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})) == {
                "configOptions",
                "modes",
            }  # v1's pickers and modes (ADR 0043, 0044)
            loaded = list(c.log)
            assert c.close() == 0
            c.validate_schemas()
        finally:
            c.kill()

    # Process A's live call, replayed to B, is still the write once B's live turn is merged over it.
    written = set(view(first))
    assert len(written) == 1 and REUSED not in written
    seen = view(replayed, second)
    assert len(seen) == 3, seen
    assert [(call["kind"], call["status"]) for call in seen.values()] == [
        ("edit", "completed"),
        ("execute", "completed"),
        ("read", "completed"),
    ]
    assert set(view(replayed)) == written and not written & set(view(second))
    assert REUSED not in seen

    # A v1 client loading the session sees the same three calls under the same ids.
    assert list(view(loaded)) == list(seen)
    assert [call["status"] for call in view(loaded).values()] == ["completed"] * 3

    # Every request was one Anthropic takes; the model's own id went back where it was not yet used.
    sent = model_requests(llm, "anthropic")
    assert [r.status for r in sent] == ["completed"] * 4, [(r.status, r.rejection) for r in sent]
    uses = [
        block["id"]
        for message in sent[-1].body["messages"]
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_use"
    ]
    assert len(uses) == 3 and len(set(uses)) == 3 and uses[0] == REUSED
