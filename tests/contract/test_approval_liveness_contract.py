"""The liveness rule, around every approver: no prompt, no question; a moot answer is denied.

The tool gate (app/tools/gate.py) owns it, so each Approver adapter gets it:
the ACP bridge (over a connection that answers "allow" on the wire) and a
scripted approver. While the question is pending, the test makes it moot the
ways a session can (cancel, close, settle); whatever the approver then says,
the call is denied and nothing runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sized
from pathlib import Path
from typing import Any, cast

import pytest

from term2.adapters.acp.approval_bridge import AcpApprover
from term2.app.tools.toolbox import WorkspaceToolbox
from term2.app.turn import Turn
from term2.domain.approval import OptionKind
from term2.domain.history import HistoryEntry, ToolStatus
from term2.domain.workspace import SessionAccess
from term2.ports.approval import ApprovalDecision, ApprovalRequest, Approver
from term2.ports.llm import ToolCallRequest
from term2.ports.tools import ToolContext
from term2.ports.updates import SessionEvent, ToolCallChanged
from tests.fakes.approvers import ScriptedApprover
from tests.fakes.permission_client import GrantingClient
from tests.fakes.sinks import RecordingSink

pytestmark = pytest.mark.anyio

Moot = Callable[[Turn], None]
MOOT: dict[str, Moot] = {
    "cancelled": Turn.cancel,
    "closed": Turn.invalidate,
    "settled": Turn.settle,
}


def acp_approver(while_pending: Callable[[], None]) -> tuple[Approver, Sized]:
    client = GrantingClient(while_pending)
    return AcpApprover(cast(Any, client), 2, cast(Any, RecordingSink())), client.sent


def scripted_approver(while_pending: Callable[[], None]) -> tuple[Approver, Sized]:
    def allow_once(request: ApprovalRequest) -> ApprovalDecision:
        while_pending()
        return ApprovalDecision(next(o.choice for o in request.options if o.kind is OptionKind.ALLOW_ONCE))

    approver = ScriptedApprover(allow_once)
    return approver, approver.requests


APPROVERS: dict[str, Callable[[Callable[[], None]], tuple[Approver, Sized]]] = {
    "acp": acp_approver,
    "scripted": scripted_approver,
}


async def _write_outside(tmp_path: Path, approver: Approver, turn: Turn) -> tuple[Path, ToolStatus, str]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    target = outside / "notes.txt"
    events: list[SessionEvent] = []

    async def emit(event: SessionEvent) -> None:
        events.append(event)

    async def record(_entry: HistoryEntry) -> None:
        pass

    ctx = ToolContext("s1", SessionAccess(str(root)), approver, cast(Any, None), emit, record, turn)
    call = ToolCallRequest("call-1", "write_file", json.dumps({"path": str(target), "content": "x\n"}))
    text = await WorkspaceToolbox().execute(call, ctx)
    last = [e for e in events if isinstance(e, ToolCallChanged)][-1]
    return target, last.call.status, text


@pytest.mark.parametrize("approver_name", sorted(APPROVERS))
async def test_a_live_prompt_gets_its_answer(tmp_path: Path, approver_name: str) -> None:
    turn = Turn()
    turn.admit("s1")
    approver, sent = APPROVERS[approver_name](lambda: None)
    target, status, _text = await _write_outside(tmp_path, approver, turn)
    assert sent and status is ToolStatus.COMPLETED and target.read_text() == "x\n"


@pytest.mark.parametrize("approver_name", sorted(APPROVERS))
@pytest.mark.parametrize("how", sorted(MOOT))
async def test_an_answer_made_moot_while_pending_is_stale(tmp_path: Path, approver_name: str, how: str) -> None:
    turn = Turn()
    turn.admit("s1")
    approver, sent = APPROVERS[approver_name](lambda: MOOT[how](turn))
    target, status, text = await _write_outside(tmp_path, approver, turn)
    assert sent, "the approver was asked"
    assert status is ToolStatus.FAILED and "(stale)" in text
    assert not target.exists()


@pytest.mark.parametrize("approver_name", sorted(APPROVERS))
async def test_no_prompt_means_no_question(tmp_path: Path, approver_name: str) -> None:
    """E.g. a run_code program's nested call arriving after its prompt ended."""
    approver, sent = APPROVERS[approver_name](lambda: None)
    target, status, text = await _write_outside(tmp_path, approver, Turn())
    assert not sent, "nobody may be asked on behalf of a prompt that is not running"
    assert status is ToolStatus.FAILED and "(no_interaction)" in text
    assert not target.exists()
