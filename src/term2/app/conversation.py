"""What the model is shown: the system prompt and past turns as chat messages."""

from __future__ import annotations

import platform

from term2.domain.content import render_for_model
from term2.domain.history import AgentMessage, HistoryEntry, TextOutput, ToolCall, UserMessage
from term2.domain.truncation import keep_head
from term2.ports.llm import ChatMessage, ToolSpec

SUMMARY_LIMIT = 2000


def system_prompt(root: str, tools: tuple[ToolSpec, ...]) -> str:
    names = ", ".join(t.name for t in tools) or "none"
    return (
        "You are term2, a careful coding agent working in a user's project.\n"
        f"Workspace root: {root}\n"
        f"Platform: {platform.system()} {platform.machine()}\n"
        f"Tools available: {names}\n"
        "Paths are absolute or relative to the workspace root. Shell commands run in a "
        "sandbox without network; edits outside the root need the user's approval. "
        "Be concise and explain what you changed."
    )


def _tool_summary(call: ToolCall) -> str:
    texts = [c.text for c in call.content if isinstance(c, TextOutput)]
    body = "\n".join(texts)
    body = keep_head(body, SUMMARY_LIMIT, "\n[... truncated]")
    return f"[earlier tool call: {call.title} -> {call.status.value}]\n{body}".rstrip()


def past_turns(entries: list[HistoryEntry]) -> list[ChatMessage]:
    """Rebuild earlier turns; past tool calls become text so any provider accepts them."""
    messages: list[ChatMessage] = []
    for entry in entries:
        if isinstance(entry, UserMessage):
            messages.append(ChatMessage("user", render_for_model(entry.content)))
        elif isinstance(entry, AgentMessage):
            messages.append(ChatMessage("assistant", entry.text))
        elif isinstance(entry, ToolCall):
            messages.append(ChatMessage("assistant", _tool_summary(entry)))
    return messages
