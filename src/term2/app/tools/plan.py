"""update_plan: the model's todo list for multi-step work, shown to the user as ACP plan updates.

The whole plan is sent each time (ACP clients replace the plan they show with
the one they receive), so the tool takes the complete list, not a diff. It is
stored in the session's history as it is sent, so `session/resume` and
`session/load` replay it like the rest of the conversation. It touches no
file and runs nothing, so it never needs approval.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Literal, cast

from term2.app.clock import new_id
from term2.app.tools.args import ArgumentError, Arguments
from term2.app.tools.base import Invocation, Outcome
from term2.domain.history import Plan, PlanEntry, ToolKind
from term2.domain.workspace import Access
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext
from term2.ports.updates import PlanChanged

STATUSES = ("pending", "in_progress", "completed")
PRIORITIES = ("high", "medium", "low")
MAX_ENTRIES = 50
MAX_ENTRY_CHARS = 500

Status = Literal["pending", "in_progress", "completed"]
Priority = Literal["high", "medium", "low"]


def _entries(args: Arguments) -> tuple[PlanEntry, ...]:
    raw = args.get("entries")
    if not isinstance(raw, list):
        raise ArgumentError("entries must be a list of {content, status, priority?} objects")
    if len(raw) > MAX_ENTRIES:
        raise ArgumentError(f"a plan has at most {MAX_ENTRIES} entries, got {len(raw)}")
    entries: list[PlanEntry] = []
    for index, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise ArgumentError(f"entry {index} must be an object")
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ArgumentError(f"entry {index}: content must be a non-empty string")
        if len(content) > MAX_ENTRY_CHARS:
            raise ArgumentError(f"entry {index}: content is longer than {MAX_ENTRY_CHARS} characters")
        status = item.get("status", "pending")
        if status not in STATUSES:
            raise ArgumentError(f"entry {index}: status must be one of {', '.join(STATUSES)}, got {status!r}")
        priority = item.get("priority", "medium")
        if priority not in PRIORITIES:
            raise ArgumentError(f"entry {index}: priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
        entries.append(PlanEntry(content.strip(), cast(Priority, priority), cast(Status, status)))
    if sum(entry.status == "in_progress" for entry in entries) > 1:
        raise ArgumentError("at most one entry may be in_progress: finish one step before starting the next")
    return tuple(entries)


def _summary(entries: tuple[PlanEntry, ...]) -> str:
    done = sum(entry.status == "completed" for entry in entries)
    current = next((entry.content for entry in entries if entry.status == "in_progress"), None)
    text = f"Plan updated: {done} of {len(entries)} steps completed."
    return text + (f" In progress: {current}" if current else "")


@dataclass(frozen=True, slots=True)
class UpdatePlan:
    name: str = "update_plan"
    kind: ToolKind = ToolKind.THINK

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Keep a short plan for multi-step work, shown to the user. Send the whole plan every time: "
                "the list replaces the previous one. Mark exactly one step in_progress while you work on "
                "it and completed when it is done. Skip it for single-step tasks."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "entries": {
                        "type": "array",
                        "maxItems": MAX_ENTRIES,
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "description": "What the step does."},
                                "status": {"type": "string", "enum": list(STATUSES)},
                                "priority": {"type": "string", "enum": list(PRIORITIES)},
                            },
                            "required": ["content", "status"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["entries"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        entries = _entries(args)
        return Invocation(
            title="Update plan",
            access=Access.READ,
            target=root,  # no file is touched: the root itself never needs approval to read
            grant_folder=root,
            locations=(),
            run=partial(self._run, entries),
        )

    async def _run(self, entries: tuple[PlanEntry, ...], ctx: ToolContext, call_id: str) -> Outcome:
        plan = Plan(new_id("plan"), entries)
        await ctx.record(plan)
        await ctx.emit(PlanChanged(plan))
        return Outcome.text_only(_summary(entries))
