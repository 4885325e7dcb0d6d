"""What the model is shown: the system prompt and past turns as chat messages.

The prompt's text is a Markdown file of its own (`prompts/system.md`, a
`string.Template`), so that it can be read, reviewed and diffed as prose; a
unit test pins its rendered form against a committed snapshot.
"""

from __future__ import annotations

import functools
import platform
import string
from datetime import date
from importlib import resources

from term2.domain.content import render_for_model
from term2.domain.history import AgentMessage, HistoryEntry, TextOutput, ToolCall, UserMessage
from term2.domain.truncation import keep_head
from term2.ports.llm import ChatMessage, ToolSpec

SUMMARY_LIMIT = 2000


@functools.cache
def _template() -> string.Template:
    return string.Template(resources.files("term2.app.prompts").joinpath("system.md").read_text("utf-8"))


def render_system_prompt(
    *, root: str, platform_name: str, today: str, tools: tuple[ToolSpec, ...], instructions: str
) -> str:
    """The prompt from `prompts/system.md`, then the project's instructions section when it has one."""
    names = ", ".join(t.name for t in tools) or "none"
    text = _template().substitute(workspace_root=root, platform=platform_name, date=today, tool_names=names)
    return text.rstrip("\n") + ("\n\n" + instructions if instructions else "") + "\n"


def system_prompt(root: str, tools: tuple[ToolSpec, ...], instructions: str = "") -> str:
    """The system message for a turn: the facts that vary (platform, today's date) filled in here."""
    return render_system_prompt(
        root=root,
        platform_name=f"{platform.system()} {platform.machine()}",
        today=date.today().isoformat(),
        tools=tools,
        instructions=instructions,
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
