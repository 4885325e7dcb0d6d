"""update_plan: the whole plan in, one plan update out, recorded for replay; bad plans are argument errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from term2.app.tools.args import ArgumentError
from term2.app.tools.plan import UpdatePlan
from term2.domain.history import HistoryEntry, Plan, PlanEntry
from term2.domain.workspace import Access, SessionAccess
from term2.ports.tools import ToolContext
from term2.ports.updates import PlanChanged, SessionEvent
from tests.fakes.turns import live_turn

pytestmark = pytest.mark.anyio


async def test_the_plan_is_sent_and_recorded_as_given(tmp_path: Path) -> None:
    events: list[SessionEvent] = []
    records: list[HistoryEntry] = []

    async def emit(event: SessionEvent) -> None:
        events.append(event)

    async def record(entry: HistoryEntry) -> None:
        records.append(entry)

    invocation = UpdatePlan().prepare(
        {"entries": [{"content": "read", "status": "completed"}, {"content": " fix ", "status": "in_progress"}]},
        str(tmp_path),
    )
    assert invocation.access is Access.READ and invocation.target == str(tmp_path)
    assert not SessionAccess(str(tmp_path)).workspace.needs_approval(invocation.access, invocation.target)
    ctx = ToolContext("s1", SessionAccess(str(tmp_path)), None, None, emit, record, live_turn())  # type: ignore[arg-type]
    outcome = await invocation.run(ctx, "call-1")
    [plan] = records
    assert isinstance(plan, Plan)
    assert plan.entries == (PlanEntry("read", "medium", "completed"), PlanEntry("fix", "medium", "in_progress"))
    assert events == [PlanChanged(plan)]
    assert outcome.text == "Plan updated: 1 of 2 steps completed. In progress: fix"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({}, "entries must be a list"),
        ({"entries": ["x"]}, "entry 1 must be an object"),
        ({"entries": [{"content": "", "status": "pending"}]}, "non-empty"),
        ({"entries": [{"content": "a", "status": "done"}]}, "status must be one of"),
        ({"entries": [{"content": "a", "status": "pending", "priority": "urgent"}]}, "priority must be one of"),
        ({"entries": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]},
         "at most one entry may be in_progress"),
        ({"entries": [{"content": "a", "status": "pending"}] * 51}, "at most 50 entries"),
    ],
)  # fmt: skip
def test_bad_plans_are_argument_errors(tmp_path: Path, args: dict[str, object], problem: str) -> None:
    with pytest.raises(ArgumentError, match=problem):
        UpdatePlan().prepare(args, str(tmp_path))
