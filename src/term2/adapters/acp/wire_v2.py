"""Session events rendered as ACP v2 `session/update` payloads (upserts, agent-owned terminals).

Every payload is typed with the v2 draft schema's own definitions (`wire_types.v2`).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, cast

from term2.adapters.acp.wire_common import (
    STOP_REASONS,
    TOOL_KINDS,
    cost_of,
    locations,
    parent_meta,
    resource_contents,
    spent_meta,
    turn_usage,
    usage_meta,
)
from term2.domain.content import ContentBlock, EmbeddedResource, ImageBlock, TextBlock, decoded_size
from term2.domain.diff import fits_an_update, git_patch, text_diff, too_large_note
from term2.domain.history import (
    DiffOutput,
    TerminalOutput,
    TextOutput,
    ToolCall,
    ToolOutput,
    ToolStatus,
)
from term2.domain.turn import StopReason
from term2.ports.updates import (
    CompactionChanged,
    CompactionChunk,
    MessageChunk,
    Notice,
    PlanChanged,
    SessionEvent,
    StateChanged,
    TerminalChunk,
    TitleChanged,
    ToolCallChanged,
    UsageChanged,
    UserMessageSent,
    WholeMessage,
)

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v2

STATUSES: dict[ToolStatus, v2.ToolCallStatus] = {
    ToolStatus.PENDING: "pending",
    ToolStatus.IN_PROGRESS: "in_progress",
    ToolStatus.COMPLETED: "completed",
    ToolStatus.FAILED: "failed",
    ToolStatus.CANCELLED: "cancelled",
}


def text_block(text: str) -> v2.ContentBlockText:
    return {"type": "text", "text": text}


def content_block(block: ContentBlock) -> v2.ContentBlock:
    if isinstance(block, TextBlock):
        return text_block(block.text)
    if isinstance(block, EmbeddedResource):
        return {"type": "resource", "resource": resource_contents(block)}
    if isinstance(block, ImageBlock):  # v2 advertises no image capability: a v1 session's image is named, not sent
        return text_block(f"[image: {block.mime_type}, {decoded_size(block.data):,} bytes]")
    return {"type": "resource_link", "uri": block.uri, "name": block.name}


def _stop_reason(reason: StopReason) -> v2.StopReason:
    if reason is StopReason.ERROR:
        # term2's own value ("_term2_error"): v2's stop reasons are open to `_`-prefixed extensions.
        return cast("v2.StopReason", reason.value)
    return STOP_REASONS[reason]


def _patch_of(output: DiffOutput) -> str:
    """The patch the tool computed in its worker thread; entries recorded before it did are rendered here
    (bounded: diff.py's step budget)."""
    if output.patch is not None:
        return output.patch
    return git_patch(output.path, output.old_text, output.new_text)


def tool_content(output: ToolOutput) -> v2.ToolCallContent:
    if isinstance(output, DiffOutput) and not fits_an_update(output.old_text, output.new_text):
        return {"type": "content", "content": text_block(too_large_note(output.path))}  # recorded before the cap
    if isinstance(output, DiffOutput) and not output.exact_path:  # shown, never a path to act on (ADR 0034)
        return {"type": "content", "content": text_block(text_diff(output.path, _patch_of(output)))}
    if isinstance(output, DiffOutput):
        change: v2.DiffChange = (
            {"operation": "add", "path": output.path}
            if output.old_text is None
            else {"operation": "modify", "path": output.path}
        )
        return {
            "type": "diff",
            "changes": [change],
            "patch": {"format": "git_patch", "text": _patch_of(output)},
        }
    if isinstance(output, TerminalOutput):
        return {"type": "terminal", "terminalId": output.terminal_id}
    assert isinstance(output, TextOutput)
    return {"type": "content", "content": text_block(output.text)}


def _terminal_snapshot(output: TerminalOutput, final: bool) -> v2.SessionUpdateTerminalUpdate:
    update: v2.SessionUpdateTerminalUpdate = {
        "sessionUpdate": "terminal_update",
        "terminalId": output.terminal_id,
        "command": output.command,
        "cwd": output.cwd,
    }
    if final:
        update["output"] = {"data": base64.b64encode(output.output.encode("utf-8")).decode("ascii")}
        status: v2.TerminalExitStatus = {}
        if output.exit_code is not None:
            status["exitCode"] = output.exit_code
        if output.signal is not None:
            status["signal"] = output.signal
        update["exitStatus"] = status
    return update


def _tool_call(call: ToolCall) -> v2.SessionUpdateToolCallUpdate:
    update: v2.SessionUpdateToolCallUpdate = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call.tool_call_id,
        "title": call.title,
        "kind": TOOL_KINDS[call.kind],
        "status": STATUSES[call.status],
        "rawInput": call.raw_input,
        "content": [tool_content(c) for c in call.content],
        "locations": locations(call.locations),
    }
    meta = parent_meta(call)
    if meta is not None:
        update["_meta"] = meta
    return update


def _state(event: StateChanged) -> v2.SessionUpdate:
    if event.state == "running":
        return {"sessionUpdate": "state_update", "state": "running"}
    if event.state == "requires_action":
        return {"sessionUpdate": "state_update", "state": "requires_action"}
    idle: v2.SessionUpdateStateUpdateIdle = {"sessionUpdate": "state_update", "state": "idle"}
    if event.stop_reason is not None:
        idle["stopReason"] = _stop_reason(event.stop_reason)
    if event.spent is not None:
        if event.spent.reported:  # never zeros passed off as measured
            idle["usage"] = turn_usage(event.spent)
        idle["_meta"] = spent_meta(event.spent)
    return idle


class V2Renderer:
    def notifications(self, session_id: str, event: SessionEvent, replay: bool) -> list[v2.UpdateSessionNotification]:
        return [{"sessionId": session_id, "update": update} for update in self.render(event, replay)]

    def render(self, event: SessionEvent, replay: bool = False) -> list[v2.SessionUpdate]:
        if isinstance(event, UserMessageSent):
            content = [content_block(b) for b in event.content]
            return [{"sessionUpdate": "user_message", "messageId": event.message_id, "content": content}]
        if isinstance(event, MessageChunk):
            chunk = text_block(event.text)
            if event.thought:
                return [{"sessionUpdate": "agent_thought_chunk", "messageId": event.message_id, "content": chunk}]
            return [{"sessionUpdate": "agent_message_chunk", "messageId": event.message_id, "content": chunk}]
        if isinstance(event, WholeMessage):
            whole: list[v2.ContentBlock] = [text_block(event.text)]
            if event.thought:
                return [{"sessionUpdate": "agent_thought", "messageId": event.message_id, "content": whole}]
            return [{"sessionUpdate": "agent_message", "messageId": event.message_id, "content": whole}]
        if isinstance(event, ToolCallChanged):
            final = event.call.status.is_final
            terminals: list[v2.SessionUpdate] = [
                _terminal_snapshot(c, final) for c in event.call.content if isinstance(c, TerminalOutput)
            ]
            return [*terminals, _tool_call(event.call)]
        if isinstance(event, TerminalChunk):
            data = base64.b64encode(event.data).decode("ascii")
            return [{"sessionUpdate": "terminal_output_chunk", "terminalId": event.terminal_id, "data": data}]
        if isinstance(event, PlanChanged):
            entries: list[v2.PlanEntry] = [
                {"content": e.content, "priority": e.priority, "status": e.status} for e in event.plan.entries
            ]
            plan: v2.PlanUpdateContent = {"type": "items", "planId": event.plan.plan_id, "entries": entries}
            return [{"sessionUpdate": "plan_update", "plan": plan}]
        if isinstance(event, UsageChanged):
            usage: v2.SessionUpdateUsageUpdate = {
                "sessionUpdate": "usage_update",
                "used": event.used,
                "size": event.size,
            }
            cost = cost_of(event.cost)
            if cost is not None:
                usage["cost"] = cost
            usage["_meta"] = usage_meta(event)
            return [usage]
        if isinstance(event, CompactionChanged):
            update: v2.SessionUpdateCompactionUpdate = {
                "sessionUpdate": "compaction_update",
                "compactionId": event.compaction_id,
                "status": event.status,
            }
            if event.status == "completed" and event.summary:
                update["summary"] = [text_block(event.summary)]
            if event.status == "failed" and event.error:
                update["error"] = event.error
            return [update]
        if isinstance(event, CompactionChunk):
            return [
                {
                    "sessionUpdate": "compaction_summary_chunk",
                    "compactionId": event.compaction_id,
                    "content": text_block(event.text),
                }
            ]
        if isinstance(event, StateChanged):
            return [_state(event)]
        if isinstance(event, Notice):  # v2's page has no notices: today's text, as it was
            told = event.as_chunk()
            return [] if told is None else self.render(told, replay)
        if isinstance(event, TitleChanged):
            return []  # the v2 page has no title update; session/list carries the title
        raise TypeError(f"unknown event {event!r}")
