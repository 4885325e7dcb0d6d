"""Domain rules: how a turn ends, session titles, history compaction, approval answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from term2.domain.approval import (
    CHOICE_NAMES,
    PERMISSION_KINDS,
    Choice,
    OptionKind,
    PermissionOption,
    is_allow,
    offered_options,
)
from term2.domain.history import (
    AgentMessage,
    AgentThought,
    Plan,
    PlanEntry,
    ToolCall,
    ToolKind,
    ToolStatus,
    UserMessage,
    compact,
    entry_key,
)
from term2.domain.session import TITLE_LIMIT, Session, SessionState
from term2.domain.turn import FinishReason, StopReason, TurnLimits, after_response, may_ask_again

# -- turn -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("finish", "tools", "expected"),
    [
        (FinishReason.STOP, 0, StopReason.END_TURN),
        (FinishReason.STOP, 2, None),  # some providers say "stop" while sending calls
        (FinishReason.TOOL_CALLS, 1, None),
        (FinishReason.TOOL_CALLS, 0, StopReason.END_TURN),
        (FinishReason.LENGTH, 0, StopReason.MAX_TOKENS),
        (FinishReason.LENGTH, 3, StopReason.MAX_TOKENS),  # truncated calls never run
        (FinishReason.CONTENT_FILTER, 0, StopReason.REFUSAL),
        (FinishReason.CONTENT_FILTER, 1, StopReason.REFUSAL),
    ],
)
def test_after_response(finish: FinishReason, tools: int, expected: StopReason | None) -> None:
    assert after_response(finish, tools) is expected


def test_request_cap() -> None:
    limits = TurnLimits(max_model_requests=3)
    assert [may_ask_again(n, limits) for n in range(5)] == [True, True, True, False, False]
    assert TurnLimits().max_model_requests == 50


def test_stop_reason_wire_values() -> None:
    assert [r.value for r in StopReason] == [
        "end_turn",
        "max_tokens",
        "max_turn_requests",
        "refusal",
        "cancelled",
        "_term2_error",
    ]


# -- session --------------------------------------------------------------------------

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _session(title: str | None = None) -> Session:
    return Session("s1", "/w", T0, T0, title=title)


def test_first_prompt_names_the_session() -> None:
    assert _session().titled_from("  fix   the\n\tbug ").title == "fix the bug"


def test_later_prompts_keep_the_title() -> None:
    titled = _session().titled_from("first")
    assert titled.titled_from("second").title == "first"


def test_blank_prompt_leaves_no_title() -> None:
    session = _session()
    assert session.titled_from(" \n\t ") is session


def test_long_prompt_title_is_truncated_with_an_ellipsis() -> None:
    exact = "a" * TITLE_LIMIT
    assert _session().titled_from(exact).title == exact
    title = _session().titled_from("b" * (TITLE_LIMIT + 1)).title
    assert title == "b" * (TITLE_LIMIT - 1) + "…"
    assert len(title) == TITLE_LIMIT


def test_touch_and_state_are_copies() -> None:
    session = _session()
    later = T0 + timedelta(minutes=5)
    touched = session.touched(later)
    assert (touched.created_at, touched.updated_at) == (T0, later)
    assert session.updated_at == T0
    running = session.with_state(SessionState.RUNNING)
    assert running.state is SessionState.RUNNING
    assert session.state is SessionState.IDLE


# -- history --------------------------------------------------------------------------


def _call(status: ToolStatus, call_id: str = "1") -> ToolCall:
    return ToolCall(call_id, "Run", ToolKind.EXECUTE, status)


def test_compact_keeps_last_snapshot_at_first_position() -> None:
    user = UserMessage("u", ())
    pending, done = _call(ToolStatus.PENDING), _call(ToolStatus.COMPLETED)
    answer = AgentMessage("m", "done")
    assert compact([user, pending, answer, done]) == [user, done, answer]


def test_compact_distinguishes_kinds_sharing_an_id() -> None:
    entries = [AgentMessage("1", "a"), _call(ToolStatus.PENDING, "1"), Plan("1", ()), AgentThought("1", "b")]
    # a thought and a message share the "msg:" identity; tools and plans have their own.
    assert compact(entries) == [AgentThought("1", "b"), _call(ToolStatus.PENDING, "1"), Plan("1", ())]
    assert [entry_key(e) for e in entries] == ["msg:1", "tool:1", "plan:1", "msg:1"]


def test_compact_plan_updates_and_empty() -> None:
    first = Plan("p", (PlanEntry("a"),))
    second = Plan("p", (PlanEntry("a", status="completed"), PlanEntry("b")))
    assert compact([first, second]) == [second]
    assert compact([]) == []


def test_tool_status_finality() -> None:
    assert {s for s in ToolStatus if s.is_final} == {ToolStatus.COMPLETED, ToolStatus.FAILED, ToolStatus.CANCELLED}


# -- approval -------------------------------------------------------------------------


def test_offered_options_keep_the_order_with_each_kind_and_name() -> None:
    offered = offered_options((Choice.ALLOW_ONCE, Choice.ALLOW_FOLDER_SESSION, Choice.REJECT))
    assert offered == (
        PermissionOption(Choice.ALLOW_ONCE, OptionKind.ALLOW_ONCE, "Allow once"),
        PermissionOption(Choice.ALLOW_FOLDER_SESSION, OptionKind.ALLOW_ALWAYS, "Allow for this folder (session)"),
        PermissionOption(Choice.REJECT, OptionKind.REJECT_ONCE, "Reject"),
    )


def test_every_choice_has_a_kind_and_a_name() -> None:
    assert set(PERMISSION_KINDS) == set(CHOICE_NAMES) == set(Choice)
    assert all(CHOICE_NAMES.values())


@pytest.mark.parametrize(
    ("choice", "allowed"),
    [
        (Choice.ALLOW_ONCE, True),
        (Choice.ALLOW_FOLDER_SESSION, True),
        (Choice.ALLOW_EDIT_FILE_SESSION, True),
        (Choice.ALLOW_EDIT_FOLDER_SESSION, True),
        (Choice.REJECT, False),
    ],
)
def test_is_allow(choice: Choice, allowed: bool) -> None:
    assert is_allow(choice) is allowed


def test_no_answer_is_not_an_allow() -> None:
    assert is_allow(None) is False
