"""History -> replay events -> ACP v1/v2 `session/update` payloads, checked against the official schemas."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from term2.adapters.acp.wire_v1 import TERMINAL_TEXT_LIMIT, V1Renderer
from term2.adapters.acp.wire_v2 import V2Renderer
from term2.app.replay import REPLAY_OUTPUT_LIMIT, replay, replay_event, truncate
from term2.domain.content import ResourceLink, TextBlock
from term2.domain.history import (
    AgentMessage,
    AgentThought,
    DiffOutput,
    HistoryEntry,
    Location,
    Plan,
    PlanEntry,
    TerminalOutput,
    TextOutput,
    ToolCall,
    ToolKind,
    ToolStatus,
    UserMessage,
)
from term2.domain.turn import StopReason
from term2.ports.updates import (
    CompactionChanged,
    CompactionChunk,
    MessageChunk,
    PlanChanged,
    SessionEvent,
    StateChanged,
    TerminalChunk,
    ToolCallChanged,
    UsageChanged,
    UserMessageSent,
    WholeMessage,
)
from tests.support.schemas import validate_outgoing


def _valid(version: int, updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for update in updates:
        validate_outgoing(
            version, {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}
        )
    return updates


def v1(event: SessionEvent, replay: bool = True, renderer: V1Renderer | None = None) -> list[dict[str, Any]]:
    return _valid(1, (renderer or V1Renderer()).render(event, replay=replay))


def v2(event: SessionEvent, replay: bool = True) -> list[dict[str, Any]]:
    return _valid(2, V2Renderer().render(event, replay=replay))


EDIT = ToolCall(
    tool_call_id="call-1",
    title="Edit /w/a.py",
    kind=ToolKind.EDIT,
    status=ToolStatus.COMPLETED,
    raw_input={"path": "/w/a.py"},
    content=(DiffOutput("/w/a.py", "x = 1\n", "x = 2\n"),),
    locations=(Location("/w/a.py", 1),),
)
CREATE = DiffOutput("/w/new.py", None, "print('hi')\n")
SHELL = TerminalOutput("term-1", "pytest -q", "/w", output="1 passed\n", exit_code=0)
PLAN = Plan("plan-1", (PlanEntry("read code", "high", "completed"), PlanEntry("write tests")))

HISTORY: list[HistoryEntry] = [
    UserMessage("u1", (TextBlock("fix the bug"), ResourceLink("file:///w/a.py", "a.py"))),
    AgentThought("t1", "looking at a.py"),
    AgentMessage("m1", "I will edit a.py"),
    EDIT,
    ToolCall("call-2", "Run tests", ToolKind.EXECUTE, ToolStatus.FAILED, {"command": "pytest -q"}, (SHELL,)),
    ToolCall("call-3", "Read", ToolKind.READ, ToolStatus.CANCELLED, {}, (TextOutput("partial"),)),
    PLAN,
]


# -- replay ---------------------------------------------------------------------------


def test_replay_event_per_history_kind() -> None:
    events = [replay_event(e) for e in HISTORY]
    assert events[0] == UserMessageSent("u1", HISTORY[0].content)  # type: ignore[union-attr]
    assert events[1] == WholeMessage("t1", "looking at a.py", thought=True)
    assert events[2] == WholeMessage("m1", "I will edit a.py")
    assert events[3] == ToolCallChanged(EDIT, first=True)
    assert all(isinstance(e, ToolCallChanged) and e.first for e in events[3:6])
    assert events[6] == PlanChanged(PLAN)


@pytest.mark.anyio
async def test_replay_streams_history_in_order() -> None:
    async def entries() -> AsyncIterator[HistoryEntry]:
        for entry in HISTORY:
            yield entry

    events = [event async for event in replay(entries())]
    assert events == [replay_event(e) for e in HISTORY]


def test_replay_rejects_unknown_entries() -> None:
    with pytest.raises(TypeError):
        replay_event("not an entry")  # type: ignore[arg-type]


def test_truncate_keeps_short_text_and_marks_long_text() -> None:
    assert truncate("short") == "short"
    exact = "x" * REPLAY_OUTPUT_LIMIT
    assert truncate(exact) == exact
    cut = truncate("y" * (REPLAY_OUTPUT_LIMIT + 1000))
    assert cut.startswith("y" * REPLAY_OUTPUT_LIMIT)
    assert cut.endswith("[term2: output truncated in replay, 1000 more characters not shown]")
    assert len(cut) < REPLAY_OUTPUT_LIMIT + 100


def test_huge_tool_outputs_are_truncated_in_replay() -> None:
    huge = "z" * (REPLAY_OUTPUT_LIMIT * 3)
    call = ToolCall(
        "c",
        "big",
        ToolKind.EXECUTE,
        ToolStatus.COMPLETED,
        content=(
            TextOutput(huge),
            TerminalOutput("t", "cat big", "/w", output=huge, exit_code=0),
            DiffOutput("/w/big", huge, huge + "!"),
            DiffOutput("/w/created", None, huge),
        ),
    )
    event = replay_event(call)
    assert isinstance(event, ToolCallChanged)
    text, terminal, diff, created = event.call.content
    marker = f"{REPLAY_OUTPUT_LIMIT * 2} more characters not shown"
    assert isinstance(text, TextOutput) and marker in text.text
    assert isinstance(terminal, TerminalOutput) and marker in terminal.output
    assert terminal.exit_code == 0 and terminal.command == "cat big"
    assert isinstance(diff, DiffOutput) and marker in diff.old_text and "more characters" in diff.new_text  # type: ignore[operator]
    assert isinstance(created, DiffOutput) and created.old_text is None and marker in created.new_text
    assert call.content[0] == TextOutput(huge)  # the stored entry is untouched
    # The truncated replay still renders to valid updates in both versions.
    v1(event)
    v2(event)


# -- v1 -------------------------------------------------------------------------------


def test_v1_replay_of_a_whole_history_is_schema_valid() -> None:
    renderer = V1Renderer()
    updates = [u for entry in HISTORY for u in v1(replay_event(entry), renderer=renderer)]
    kinds = [u["sessionUpdate"] for u in updates]
    assert kinds == [
        "user_message_chunk",
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call",
        "tool_call",
        "plan",
    ]


def test_v1_user_message_chunks_only_in_replay() -> None:
    event = replay_event(HISTORY[0])
    assert v1(event) == [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "fix the bug"}},
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"},
        },
    ]
    assert V1Renderer().render(event, replay=False) == []


@pytest.mark.parametrize("event", [WholeMessage("m", "hello"), MessageChunk("m", "hello")])
def test_v1_agent_message_chunk(event: SessionEvent) -> None:
    assert v1(event) == [{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hello"}}]


@pytest.mark.parametrize("event", [WholeMessage("t", "hmm", thought=True), MessageChunk("t", "hmm", thought=True)])
def test_v1_agent_thought_chunk(event: SessionEvent) -> None:
    assert v1(event) == [{"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}]


def test_v1_tool_call_with_diff() -> None:
    (update,) = v1(ToolCallChanged(EDIT, first=True))
    assert update == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call-1",
        "title": "Edit /w/a.py",
        "kind": "edit",
        "status": "completed",
        "rawInput": {"path": "/w/a.py"},
        "content": [{"type": "diff", "path": "/w/a.py", "oldText": "x = 1\n", "newText": "x = 2\n"}],
        "locations": [{"path": "/w/a.py", "line": 1}],
    }


def test_v1_created_file_diff_has_null_old_text() -> None:
    call = ToolCall("c", "Create", ToolKind.EDIT, ToolStatus.COMPLETED, content=(CREATE,), locations=(Location("/w"),))
    (update,) = v1(ToolCallChanged(call, first=False))
    assert update["sessionUpdate"] == "tool_call_update"
    assert update["content"] == [{"type": "diff", "path": "/w/new.py", "oldText": None, "newText": "print('hi')\n"}]
    assert update["locations"] == [{"path": "/w"}]


def test_v1_cancelled_tool_call_is_reported_failed() -> None:
    call = ToolCall("c", "Read", ToolKind.READ, ToolStatus.CANCELLED)
    (update,) = v1(ToolCallChanged(call, first=True))
    assert update["status"] == "failed"


@pytest.mark.parametrize("status", [s for s in ToolStatus if s is not ToolStatus.CANCELLED])
def test_v1_other_statuses_pass_through(status: ToolStatus) -> None:
    (update,) = v1(ToolCallChanged(ToolCall("c", "t", ToolKind.OTHER, status), first=False))
    assert update["status"] == status.value


def test_v1_shell_output_travels_as_text() -> None:
    call = ToolCall("c", "Run", ToolKind.EXECUTE, ToolStatus.COMPLETED, content=(SHELL,))
    (update,) = v1(ToolCallChanged(call, first=True))
    assert update["content"] == [
        {"type": "content", "content": {"type": "text", "text": "$ pytest -q\n1 passed\n\n[exit code 0]"}}
    ]


def test_v1_live_terminal_text_grows_is_capped_and_resets_when_final() -> None:
    renderer = V1Renderer()
    first = v1(TerminalChunk("c", "t", b"ab"), replay=False, renderer=renderer)
    second = v1(TerminalChunk("c", "t", b"cd"), replay=False, renderer=renderer)
    assert first[0]["content"][0]["content"]["text"] == "ab"
    assert second[0] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
        "content": [{"type": "content", "content": {"type": "text", "text": "abcd"}}],
    }
    big = v1(TerminalChunk("c", "t", b"x" * (TERMINAL_TEXT_LIMIT + 10)), replay=False, renderer=renderer)
    text = big[0]["content"][0]["content"]["text"]
    assert text.startswith("[... earlier output truncated]\n")
    assert text.endswith("x" * TERMINAL_TEXT_LIMIT)
    v1(ToolCallChanged(ToolCall("c", "Run", ToolKind.EXECUTE, ToolStatus.COMPLETED), first=False), renderer=renderer)
    again = v1(TerminalChunk("c", "t", b"new"), replay=False, renderer=renderer)
    assert again[0]["content"][0]["content"]["text"] == "new"


def test_v1_plan() -> None:
    assert v1(PlanChanged(PLAN)) == [
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "read code", "priority": "high", "status": "completed"},
                {"content": "write tests", "priority": "medium", "status": "pending"},
            ],
        }
    ]


def test_v1_has_no_state_updates() -> None:
    assert V1Renderer().render(StateChanged("idle", StopReason.END_TURN)) == []


def test_v1_usage_update() -> None:
    reported = {"term2": {"usage": "reported"}}
    assert v1(UsageChanged(used=10, size=100)) == [
        {"sessionUpdate": "usage_update", "used": 10, "size": 100, "_meta": reported}
    ]
    estimated = v1(UsageChanged(used=10, size=100, estimated=True))
    assert estimated[0]["_meta"] == {"term2": {"usage": "estimated"}}


# -- v2 -------------------------------------------------------------------------------


def test_v2_replay_of_a_whole_history_is_schema_valid() -> None:
    updates = [u for entry in HISTORY for u in v2(replay_event(entry))]
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message",
        "agent_thought",
        "agent_message",
        "tool_call_update",
        "terminal_update",
        "tool_call_update",
        "tool_call_update",
        "plan_update",
    ]


def test_v2_messages_carry_message_ids() -> None:
    assert v2(replay_event(HISTORY[0])) == [
        {
            "sessionUpdate": "user_message",
            "messageId": "u1",
            "content": [
                {"type": "text", "text": "fix the bug"},
                {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"},
            ],
        }
    ]
    assert v2(WholeMessage("m1", "done")) == [
        {"sessionUpdate": "agent_message", "messageId": "m1", "content": [{"type": "text", "text": "done"}]}
    ]
    assert v2(WholeMessage("t1", "hmm", thought=True)) == [
        {"sessionUpdate": "agent_thought", "messageId": "t1", "content": [{"type": "text", "text": "hmm"}]}
    ]


def test_v2_live_chunks_carry_message_ids() -> None:
    assert v2(MessageChunk("m1", "par"), replay=False) == [
        {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": "par"}}
    ]
    assert v2(MessageChunk("t1", "th", thought=True), replay=False)[0]["sessionUpdate"] == "agent_thought_chunk"


def test_v2_tool_call_with_diff_is_a_git_patch() -> None:
    (update,) = v2(ToolCallChanged(EDIT, first=True))
    assert update["sessionUpdate"] == "tool_call_update"
    assert update["status"] == "completed"
    assert update["locations"] == [{"path": "/w/a.py", "line": 1}]
    (diff,) = update["content"]
    assert diff["type"] == "diff"
    assert diff["changes"] == [{"operation": "modify", "path": "/w/a.py"}]
    assert diff["patch"]["format"] == "git_patch"
    assert "-x = 1\n+x = 2\n" in diff["patch"]["text"]
    assert diff["patch"]["text"].startswith("diff --git a/w/a.py b/w/a.py\n")


def test_v2_created_file_is_an_add() -> None:
    call = ToolCall("c", "Create", ToolKind.EDIT, ToolStatus.COMPLETED, content=(CREATE,))
    (update,) = v2(ToolCallChanged(call, first=True))
    (diff,) = update["content"]
    assert diff["changes"] == [{"operation": "add", "path": "/w/new.py"}]
    assert "new file mode" in diff["patch"]["text"]


def test_v2_cancelled_status_is_kept() -> None:
    (update,) = v2(ToolCallChanged(ToolCall("c", "Read", ToolKind.READ, ToolStatus.CANCELLED), first=True))
    assert update["status"] == "cancelled"


def test_v2_final_terminal_snapshot_precedes_the_call_that_references_it() -> None:
    call = ToolCall("c", "Run", ToolKind.EXECUTE, ToolStatus.COMPLETED, content=(SHELL,))
    terminal, update = v2(ToolCallChanged(call, first=True))
    assert terminal == {
        "sessionUpdate": "terminal_update",
        "terminalId": "term-1",
        "command": "pytest -q",
        "cwd": "/w",
        "output": {"data": base64.b64encode(b"1 passed\n").decode("ascii")},
        "exitStatus": {"exitCode": 0},
    }
    assert update["content"] == [{"type": "terminal", "terminalId": "term-1"}]


def test_v2_running_terminal_has_no_output_or_exit_status() -> None:
    running = TerminalOutput("term-2", "sleep 9", "/w")
    call = ToolCall("c", "Run", ToolKind.EXECUTE, ToolStatus.IN_PROGRESS, content=(running,))
    terminal, _ = v2(ToolCallChanged(call, first=True))
    assert "output" not in terminal and "exitStatus" not in terminal


def test_v2_killed_terminal_reports_its_signal() -> None:
    killed = TerminalOutput("term-3", "yes", "/w", output="y\n", signal="SIGKILL")
    call = ToolCall("c", "Run", ToolKind.EXECUTE, ToolStatus.FAILED, content=(killed,))
    terminal, _ = v2(ToolCallChanged(call, first=False))
    assert terminal["exitStatus"] == {"signal": "SIGKILL"}


def test_v2_terminal_output_chunk_is_base64() -> None:
    assert v2(TerminalChunk("c", "term-1", b"\x00\xffok"), replay=False) == [
        {"sessionUpdate": "terminal_output_chunk", "terminalId": "term-1", "data": "AP9vaw=="}
    ]


def test_v2_plan_update_is_nested() -> None:
    assert v2(PlanChanged(PLAN)) == [
        {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": "plan-1",
                "entries": [
                    {"content": "read code", "priority": "high", "status": "completed"},
                    {"content": "write tests", "priority": "medium", "status": "pending"},
                ],
            },
        }
    ]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (StateChanged("running"), {"sessionUpdate": "state_update", "state": "running"}),
        (StateChanged("requires_action"), {"sessionUpdate": "state_update", "state": "requires_action"}),
        (
            StateChanged("idle", StopReason.END_TURN),
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"},
        ),
        (
            StateChanged("idle", StopReason.CANCELLED),
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"},
        ),
        (
            StateChanged("idle", StopReason.ERROR),
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": "_term2_error"},
        ),
        (
            StateChanged("idle", StopReason.MAX_TURN_REQUESTS),
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": "max_turn_requests"},
        ),
    ],
)
def test_v2_state_update(event: StateChanged, expected: dict[str, Any]) -> None:
    assert v2(event, replay=False) == [expected]


def test_v2_usage_update() -> None:
    reported = {"term2": {"usage": "reported"}}
    assert v2(UsageChanged(used=5, size=50)) == [
        {"sessionUpdate": "usage_update", "used": 5, "size": 50, "_meta": reported}
    ]
    estimated = v2(UsageChanged(used=5, size=50, estimated=True))
    assert estimated[0]["_meta"] == {"term2": {"usage": "estimated"}}


@pytest.mark.parametrize("renderer", [V1Renderer(), V2Renderer()])
def test_renderers_reject_unknown_events(renderer: V1Renderer | V2Renderer) -> None:
    with pytest.raises(TypeError):
        renderer.render("nope")  # type: ignore[arg-type]


COMPACTION_EVENTS: list[SessionEvent] = [
    CompactionChanged("compaction_1", "in_progress"),
    CompactionChunk("compaction_1", "The user asked "),
    CompactionChunk("compaction_1", "for a fix."),
    CompactionChanged("compaction_1", "completed", summary="The user asked for a fix."),
    CompactionChanged("compaction_2", "failed", error="nothing could be compacted"),
]


def test_v1_sends_compaction_updates_only_to_a_client_that_advertised_them() -> None:
    told = [u for e in COMPACTION_EVENTS for u in v1(e, replay=False, renderer=V1Renderer(compaction=True))]
    assert [u["sessionUpdate"] for u in told] == [
        "compaction_update",
        "compaction_summary_chunk",
        "compaction_summary_chunk",
        "compaction_update",
        "compaction_update",
    ]
    assert told[3]["summary"] == [{"type": "text", "text": "The user asked for a fix."}]
    assert told[4] == {
        "sessionUpdate": "compaction_update",
        "compactionId": "compaction_2",
        "status": "failed",
        "error": "nothing could be compacted",
    }
    plain = [u for e in COMPACTION_EVENTS for u in v1(e, replay=False, renderer=V1Renderer())]
    assert [u["sessionUpdate"] for u in plain] == ["agent_thought_chunk"]  # one notice per compaction started


def test_v2_always_sends_compaction_updates() -> None:
    told = [u for e in COMPACTION_EVENTS for u in v2(e, replay=False)]
    assert [u["sessionUpdate"] for u in told][:2] == ["compaction_update", "compaction_summary_chunk"]
    assert told[1]["content"] == {"type": "text", "text": "The user asked "}
