"""run_shell drawn as Zed's display-only terminal through tool-call `_meta` (v1, issue 19).

The shapes are the ones Zed's `handle_session_notification` reads
(zed-industries/zed `crates/agent_servers/src/acp.rs`): `terminal_info` on a
`tool_call`, `terminal_output` and `terminal_exit` on `tool_call_update`s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from term2.adapters.acp.wire_v1 import V1Renderer
from term2.domain.history import Location, TerminalOutput, ToolCall, ToolKind, ToolStatus
from term2.ports.updates import SessionEvent, TerminalChunk, ToolCallChanged
from tests.support.schemas import validate_outgoing

CALL = ToolCall("call_1", "Run `ls`", ToolKind.EXECUTE, ToolStatus.PENDING, {"command": "ls"}, (), (Location("/w"),))
RUNNING = replace(CALL, status=ToolStatus.IN_PROGRESS, content=(TerminalOutput("term_call_1", "ls", "/w"),))
DONE = replace(
    CALL,
    status=ToolStatus.COMPLETED,
    content=(TerminalOutput("term_call_1", "ls", "/w", "a\nb ✓\n\x18\x1b[0m\n[a notice]", 0, None),),
)


def _render(renderer: V1Renderer, event: SessionEvent, replay: bool = False) -> list[dict[str, Any]]:
    updates: list[dict[str, Any]] = list(renderer.render(event, replay=replay))  # type: ignore[arg-type]
    for update in updates:
        message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}
        validate_outgoing(1, message)
    return updates


def test_a_live_command_creates_streams_and_ends_a_terminal() -> None:
    r = V1Renderer(display_terminals=True)
    [pending] = _render(r, ToolCallChanged(CALL, first=True))
    assert pending["sessionUpdate"] == "tool_call" and "_meta" not in pending

    [started] = _render(r, ToolCallChanged(RUNNING, first=False))
    assert started["sessionUpdate"] == "tool_call"  # Zed creates terminals from tool_call only; it upserts
    assert started["toolCallId"] == "call_1" and started["status"] == "in_progress"
    assert started["content"] == [{"type": "terminal", "terminalId": "term_call_1"}]
    assert started["_meta"] == {"terminal_info": {"terminal_id": "term_call_1", "cwd": "/w"}}

    chunks = [b"a\nb \xe2", b"\x9c", b"\x93\n"]  # a UTF-8 sequence split over three chunks
    streamed = [_render(r, TerminalChunk("call_1", "term_call_1", c)) for c in chunks]
    assert streamed[1] == []  # nothing whole to show yet
    data = [u["_meta"]["terminal_output"] for [u] in (streamed[0], streamed[2])]
    assert data == [{"terminal_id": "term_call_1", "data": "a\nb "}, {"terminal_id": "term_call_1", "data": "✓\n"}]
    assert all(u["sessionUpdate"] == "tool_call_update" and "content" not in u for [u] in (streamed[0], streamed[2]))

    final, notices, ended = _render(r, ToolCallChanged(DONE, first=False))
    assert final["sessionUpdate"] == "tool_call_update" and final["status"] == "completed"
    assert final["content"] == [{"type": "terminal", "terminalId": "term_call_1"}]
    assert "_meta" not in final  # announced once
    assert notices["_meta"] == {"terminal_output": {"terminal_id": "term_call_1", "data": "\x18\x1b[0m\n[a notice]"}}
    assert ended["_meta"] == {"terminal_exit": {"terminal_id": "term_call_1", "exit_code": 0, "signal": None}}


def test_a_replay_draws_the_whole_output_again() -> None:
    r = V1Renderer(display_terminals=True)
    for _ in range(2):  # the same session loaded twice on one connection: a new thread each time
        created, output, ended = _render(r, ToolCallChanged(DONE, first=True), replay=True)
        assert created["sessionUpdate"] == "tool_call"
        assert created["_meta"]["terminal_info"] == {"terminal_id": "term_call_1", "cwd": "/w"}
        assert output["_meta"]["terminal_output"]["data"] == "a\nb ✓\n\x18\x1b[0m\n[a notice]"
        assert ended["_meta"]["terminal_exit"]["exit_code"] == 0


def test_a_killed_command_ends_with_its_signal() -> None:
    r = V1Renderer(display_terminals=True)
    _render(r, ToolCallChanged(RUNNING, first=True))
    killed = replace(
        RUNNING, status=ToolStatus.FAILED, content=(TerminalOutput("term_call_1", "ls", "/w", "", None, "SIGKILL"),)
    )
    final, ended = _render(r, ToolCallChanged(killed, first=False))
    assert final["status"] == "failed"
    assert ended["_meta"]["terminal_exit"] == {"terminal_id": "term_call_1", "exit_code": None, "signal": "SIGKILL"}


def test_a_parents_meta_is_kept_beside_terminal_info() -> None:
    r = V1Renderer(display_terminals=True)
    [started] = _render(r, ToolCallChanged(replace(RUNNING, parent_id="call_0"), first=True))
    assert started["_meta"] == {
        "term2": {"parentToolCallId": "call_0"},
        "terminal_info": {"terminal_id": "term_call_1", "cwd": "/w"},
    }


def test_a_client_without_the_capability_gets_text_as_before() -> None:
    r = V1Renderer()
    _render(r, ToolCallChanged(CALL, first=True))
    [started] = _render(r, ToolCallChanged(RUNNING, first=False))
    assert started["sessionUpdate"] == "tool_call_update" and "_meta" not in started
    assert started["content"][0]["type"] == "content"
    [chunk] = _render(r, TerminalChunk("call_1", "term_call_1", b"a\n"))
    assert chunk["content"] == [{"type": "content", "content": {"type": "text", "text": "a\n"}}]
    [final] = _render(r, ToolCallChanged(DONE, first=False))
    assert final["content"][0]["content"]["text"].startswith("$ ls\na\nb ✓")
    assert "_meta" not in final
