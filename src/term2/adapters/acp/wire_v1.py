"""Session events rendered as ACP v1 `session/update` payloads.

v1 has closed enums and no agent-owned terminals: a cancelled tool call is
reported as failed, and shell output travels as the call's text content, or
as a display-only terminal to a client that draws one (display_terminals.py).
Every payload is typed with the v1 schema's own definitions (`wire_types.v1`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from term2.adapters.acp.display_terminals import DisplayTerminals
from term2.adapters.acp.wire_common import (
    TOOL_KINDS,
    cost_of,
    locations,
    parent_meta,
    resource_contents,
    usage_meta,
)
from term2.domain.content import ContentBlock, EmbeddedResource, ImageBlock, TextBlock
from term2.domain.diff import fits_an_update, git_patch, text_diff, too_large_note
from term2.domain.history import (
    DiffOutput,
    TerminalOutput,
    TextOutput,
    ToolCall,
    ToolOutput,
    ToolStatus,
)
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
    from term2.adapters.acp.wire_types import v1

TERMINAL_TEXT_LIMIT = 64 * 1024

STATUSES: dict[ToolStatus, v1.ToolCallStatus] = {
    ToolStatus.PENDING: "pending",
    ToolStatus.IN_PROGRESS: "in_progress",
    ToolStatus.COMPLETED: "completed",
    ToolStatus.FAILED: "failed",
    ToolStatus.CANCELLED: "failed",  # v1 has no cancelled status
}


def text_block(text: str) -> v1.ContentBlockText:
    return {"type": "text", "text": text}


def content_block(block: ContentBlock) -> v1.ContentBlock:
    if isinstance(block, TextBlock):
        return text_block(block.text)
    if isinstance(block, EmbeddedResource):
        return {"type": "resource", "resource": resource_contents(block)}
    if isinstance(block, ImageBlock) and block.embedded and block.uri is not None:  # replayed as it came
        return {"type": "resource", "resource": {"uri": block.uri, "blob": block.data, "mimeType": block.mime_type}}
    if isinstance(block, ImageBlock):
        image: v1.ContentBlockImage = {"type": "image", "data": block.data, "mimeType": block.mime_type}
        if block.uri is not None:
            image["uri"] = block.uri
        return image
    return {"type": "resource_link", "uri": block.uri, "name": block.name}


def tool_content(output: ToolOutput) -> v1.ToolCallContent:
    if isinstance(output, DiffOutput):
        if not fits_an_update(output.old_text, output.new_text):  # recorded before diffs were capped
            return {"type": "content", "content": text_block(too_large_note(output.path))}
        if not output.exact_path:  # a name with no exact JSON form: shown, never a path to act on (ADR 0034)
            patch = (
                output.patch if output.patch is not None else git_patch(output.path, output.old_text, output.new_text)
            )
            return {"type": "content", "content": text_block(text_diff(output.path, patch))}
        return {"type": "diff", "path": output.path, "oldText": output.old_text, "newText": output.new_text}
    if isinstance(output, TerminalOutput):
        status = "" if output.exit_code is None else f"\n[exit code {output.exit_code}]"
        return {"type": "content", "content": text_block(f"$ {output.command}\n{output.output}{status}")}
    assert isinstance(output, TextOutput)
    return {"type": "content", "content": text_block(output.text)}


def _tool_call(
    call: ToolCall, first: bool, terminal: TerminalOutput | None = None, extra: dict[str, Any] | None = None
) -> v1.SessionUpdate:
    """`terminal`: the output the client draws as a display-only terminal; `extra`: more `_meta` keys."""
    fields: v1.ToolCall = {
        "toolCallId": call.tool_call_id,
        "title": call.title,
        "kind": TOOL_KINDS[call.kind],
        "status": STATUSES[call.status],
        "rawInput": call.raw_input,
        "content": [
            {"type": "terminal", "terminalId": c.terminal_id} if c is terminal else tool_content(c)
            for c in call.content
        ],
        "locations": locations(call.locations),
    }
    meta = {**(parent_meta(call) or {}), **(extra or {})}
    if meta:
        fields["_meta"] = meta
    if first:
        return {"sessionUpdate": "tool_call", **fields}
    return {"sessionUpdate": "tool_call_update", **fields}


def _compaction_update(event: CompactionChanged) -> v1.SessionUpdate:
    update: v1.SessionUpdateCompactionUpdate = {
        "sessionUpdate": "compaction_update",
        "compactionId": event.compaction_id,
        "status": event.status,
    }
    if event.status == "completed" and event.summary:
        update["summary"] = [text_block(event.summary)]
    if event.status == "failed" and event.error:
        update["error"] = event.error
    return update


COMPACTING = "Compacting the conversation to fit the model's context window…"


def on_its_own_line(text: str) -> str:
    """News in a client's message text stands on its own line, so it never runs into what the model
    streams around it ("…the providerRetrying in 1.6 s…")."""
    return f"\n{text.strip(chr(10))}\n"


def _notice(text: str, severity: v1.NoticeSeverity) -> v1.SessionUpdateNotice:
    """A `notice`: its first line as the title (which must stand alone), the rest as the description."""
    title, _, rest = text.strip().partition("\n")
    notice: v1.SessionUpdateNotice = {"sessionUpdate": "notice", "severity": severity, "title": title or "term2"}
    if rest.strip():
        notice["description"] = rest.strip()
    return notice


def _compaction_notice(event: CompactionChanged) -> list[v1.SessionUpdate]:
    if event.status == "in_progress":
        return [_notice(COMPACTING, "info")]
    if event.status == "completed":
        return [_notice("The conversation was compacted to fit the model's context window.", "info")]
    if event.status == "failed":
        return [_notice(f"Compacting the conversation failed: {event.error or 'no reason given'}", "warning")]
    return []


class V1Renderer:
    """Stateful only for live shell output, which v1 shows as growing text."""

    def __init__(self, compaction: bool = False, display_terminals: bool = False, notices: bool = False) -> None:
        self._terminal_text: dict[str, str] = {}
        self._notices = notices  # the client advertised session.notices: news goes as `notice` updates
        self._compaction = compaction  # the client advertised session.compaction (v1 sends it no update otherwise)
        # the client advertised _meta.terminal_output: shell output goes to a terminal it draws
        self._display = DisplayTerminals() if display_terminals else None

    def notifications(self, session_id: str, event: SessionEvent, replay: bool) -> list[v1.SessionNotification]:
        return [{"sessionId": session_id, "update": update} for update in self.render(event, replay)]

    def render(self, event: SessionEvent, replay: bool = False) -> list[v1.SessionUpdate]:
        if isinstance(event, UserMessageSent):
            if not replay:
                return []  # the client already shows what its user typed
            return [{"sessionUpdate": "user_message_chunk", "content": content_block(b)} for b in event.content]
        if isinstance(event, (MessageChunk, WholeMessage)):
            if event.thought:
                return [{"sessionUpdate": "agent_thought_chunk", "content": text_block(event.text)}]
            return [{"sessionUpdate": "agent_message_chunk", "content": text_block(event.text)}]
        if isinstance(event, ToolCallChanged):
            if event.call.status.is_final:
                self._terminal_text.pop(event.call.tool_call_id, None)
            shown = self._display.tool_call(event.call, replay) if self._display is not None else None
            if shown is not None and shown.terminal is not None:
                first = event.first or shown.announce
                return [_tool_call(event.call, first, shown.terminal, shown.meta), *shown.after]
            return [_tool_call(event.call, event.first)]
        if isinstance(event, TerminalChunk):
            if self._display is not None:
                return self._display.chunk(event)
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
            entries: list[v1.PlanEntry] = [
                {"content": e.content, "priority": e.priority, "status": e.status} for e in event.plan.entries
            ]
            return [{"sessionUpdate": "plan", "entries": entries}]
        if isinstance(event, UsageChanged):
            usage: v1.SessionUpdateUsageUpdate = {
                "sessionUpdate": "usage_update",
                "used": event.used,
                "size": event.size,
            }
            cost = cost_of(event.cost)
            if cost is not None:
                usage["cost"] = cost
            usage["_meta"] = usage_meta(event)
            return [usage]
        if isinstance(event, Notice):
            if self._notices:
                return [_notice(event.text, event.severity)]
            told = event.as_chunk()
            return [] if told is None else self.render(replace(told, text=on_its_own_line(event.text)))
        if isinstance(event, CompactionChanged):
            if self._compaction:
                return [_compaction_update(event)]
            if self._notices:
                return _compaction_notice(event)
            if event.status == "in_progress":  # a client without the capability still learns why the pause
                return [{"sessionUpdate": "agent_thought_chunk", "content": text_block(on_its_own_line(COMPACTING))}]
            return []
        if isinstance(event, CompactionChunk):
            if not self._compaction:
                return []
            chunk: v1.SessionUpdate = {
                "sessionUpdate": "compaction_summary_chunk",
                "compactionId": event.compaction_id,
                "content": text_block(event.text),
            }
            return [chunk]
        if isinstance(event, StateChanged):
            return []  # v1 ends a turn with the session/prompt response instead
        if isinstance(event, TitleChanged):
            info: v1.SessionUpdateSessionInfoUpdate = {
                "sessionUpdate": "session_info_update",
                "title": event.title,
                "updatedAt": event.updated_at.isoformat(),
            }
            return [info]
        raise TypeError(f"unknown event {event!r}")
