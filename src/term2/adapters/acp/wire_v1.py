"""Session events rendered as ACP v1 `session/update` payloads.

v1 has closed enums and no agent-owned terminals: a cancelled tool call is
reported as failed, and shell output travels as the call's text content.
"""

from __future__ import annotations

from typing import Any

from term2.adapters.acp.wire_common import content_block, locations, parent_meta, text_block
from term2.domain.history import DiffOutput, TerminalOutput, TextOutput, ToolCall, ToolOutput, ToolStatus
from term2.ports.updates import (
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

TERMINAL_TEXT_LIMIT = 64 * 1024


def _tool_content(output: ToolOutput) -> dict[str, Any]:
    if isinstance(output, DiffOutput):
        return {"type": "diff", "path": output.path, "oldText": output.old_text, "newText": output.new_text}
    if isinstance(output, TerminalOutput):
        status = "" if output.exit_code is None else f"\n[exit code {output.exit_code}]"
        return {"type": "content", "content": text_block(f"$ {output.command}\n{output.output}{status}")}
    assert isinstance(output, TextOutput)
    return {"type": "content", "content": text_block(output.text)}


def _status(status: ToolStatus) -> str:
    return "failed" if status is ToolStatus.CANCELLED else status.value


def _tool_call(call: ToolCall, first: bool) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call" if first else "tool_call_update",
        "toolCallId": call.tool_call_id,
        "title": call.title,
        "kind": call.kind.value,
        "status": _status(call.status),
        "rawInput": call.raw_input,
        "content": [_tool_content(c) for c in call.content],
        "locations": locations(call.locations),
        **parent_meta(call),
    }
    return update


class V1Renderer:
    """Stateful only for live shell output, which v1 shows as growing text."""

    def __init__(self) -> None:
        self._terminal_text: dict[str, str] = {}

    def render(self, event: SessionEvent, replay: bool = False) -> list[dict[str, Any]]:
        if isinstance(event, UserMessageSent):
            if not replay:
                return []  # the client already shows what its user typed
            return [
                {"sessionUpdate": "user_message_chunk", "content": content_block(b)} for b in event.content
            ]
        if isinstance(event, (MessageChunk, WholeMessage)):
            kind = "agent_thought_chunk" if event.thought else "agent_message_chunk"
            return [{"sessionUpdate": kind, "content": text_block(event.text)}]
        if isinstance(event, ToolCallChanged):
            if event.call.status.is_final:
                self._terminal_text.pop(event.call.tool_call_id, None)
            return [_tool_call(event.call, event.first)]
        if isinstance(event, TerminalChunk):
            text = self._terminal_text.get(event.tool_call_id, "") + event.data.decode("utf-8", "replace")
            if len(text) > TERMINAL_TEXT_LIMIT:
                text = "[... earlier output truncated]\n" + text[-TERMINAL_TEXT_LIMIT:]
            self._terminal_text[event.tool_call_id] = text
            return [
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": event.tool_call_id,
                    "content": [{"type": "content", "content": text_block(text)}],
                }
            ]
        if isinstance(event, PlanChanged):
            entries = [
                {"content": e.content, "priority": e.priority, "status": e.status} for e in event.plan.entries
            ]
            return [{"sessionUpdate": "plan", "entries": entries}]
        if isinstance(event, UsageChanged):
            return [{"sessionUpdate": "usage_update", "used": event.used, "size": event.size}]
        if isinstance(event, StateChanged):
            return []  # v1 ends a turn with the session/prompt response instead
        raise TypeError(f"unknown event {event!r}")
