"""Session events rendered as ACP v2 `session/update` payloads (upserts, agent-owned terminals)."""

from __future__ import annotations

import base64
from typing import Any

from term2.adapters.acp.wire_common import content_block, locations, parent_meta, text_block
from term2.domain.diff import git_patch
from term2.domain.history import DiffOutput, TerminalOutput, TextOutput, ToolCall, ToolOutput
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


def _tool_content(output: ToolOutput) -> dict[str, Any]:
    if isinstance(output, DiffOutput):
        operation = "add" if output.old_text is None else "modify"
        return {
            "type": "diff",
            "changes": [{"operation": operation, "path": output.path}],
            "patch": {"format": "git_patch", "text": git_patch(output.path, output.old_text, output.new_text)},
        }
    if isinstance(output, TerminalOutput):
        return {"type": "terminal", "terminalId": output.terminal_id}
    assert isinstance(output, TextOutput)
    return {"type": "content", "content": text_block(output.text)}


def _terminal_snapshot(output: TerminalOutput, final: bool) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": "terminal_update",
        "terminalId": output.terminal_id,
        "command": output.command,
        "cwd": output.cwd,
    }
    if final:
        update["output"] = {"data": base64.b64encode(output.output.encode("utf-8")).decode("ascii")}
        status: dict[str, Any] = {}
        if output.exit_code is not None:
            status["exitCode"] = output.exit_code
        if output.signal is not None:
            status["signal"] = output.signal
        update["exitStatus"] = status
    return update


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call.tool_call_id,
        "title": call.title,
        "kind": call.kind.value,
        "status": call.status.value,
        "rawInput": call.raw_input,
        "content": [_tool_content(c) for c in call.content],
        "locations": locations(call.locations),
        **parent_meta(call),
    }


class V2Renderer:
    def render(self, event: SessionEvent, replay: bool = False) -> list[dict[str, Any]]:
        if isinstance(event, UserMessageSent):
            return [
                {
                    "sessionUpdate": "user_message",
                    "messageId": event.message_id,
                    "content": [content_block(b) for b in event.content],
                }
            ]
        if isinstance(event, MessageChunk):
            kind = "agent_thought_chunk" if event.thought else "agent_message_chunk"
            return [{"sessionUpdate": kind, "messageId": event.message_id, "content": text_block(event.text)}]
        if isinstance(event, WholeMessage):
            kind = "agent_thought" if event.thought else "agent_message"
            return [{"sessionUpdate": kind, "messageId": event.message_id, "content": [text_block(event.text)]}]
        if isinstance(event, ToolCallChanged):
            final = event.call.status.is_final
            terminals = [
                _terminal_snapshot(c, final) for c in event.call.content if isinstance(c, TerminalOutput)
            ]
            return [*terminals, _tool_call(event.call)]
        if isinstance(event, TerminalChunk):
            data = base64.b64encode(event.data).decode("ascii")
            return [{"sessionUpdate": "terminal_output_chunk", "terminalId": event.terminal_id, "data": data}]
        if isinstance(event, PlanChanged):
            entries = [
                {"content": e.content, "priority": e.priority, "status": e.status} for e in event.plan.entries
            ]
            return [
                {
                    "sessionUpdate": "plan_update",
                    "plan": {"type": "items", "planId": event.plan.plan_id, "entries": entries},
                }
            ]
        if isinstance(event, UsageChanged):
            return [{"sessionUpdate": "usage_update", "used": event.used, "size": event.size}]
        if isinstance(event, StateChanged):
            update: dict[str, Any] = {"sessionUpdate": "state_update", "state": event.state}
            if event.stop_reason is not None:
                update["stopReason"] = event.stop_reason.value
            return [update]
        raise TypeError(f"unknown event {event!r}")
