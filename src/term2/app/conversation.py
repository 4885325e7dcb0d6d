"""What the model is shown: the system prompt and the session's transcript.

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
from term2.domain.transcript import ChatMessage, ContextCompaction, ModelMessage, apply_compaction, well_formed
from term2.domain.truncation import keep_head
from term2.ports.llm import ToolSpec


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


def _legacy(entry: HistoryEntry) -> ModelMessage | None:
    """A turn stored before the transcript was (term2 < 0.2): as text, so any provider accepts it."""
    if isinstance(entry, UserMessage):
        return ModelMessage(entry.message_id, ChatMessage("user", render_for_model(entry.content)))
    if isinstance(entry, AgentMessage):
        return ModelMessage(entry.message_id, ChatMessage("assistant", entry.text))
    if isinstance(entry, ToolCall):
        texts = keep_head("\n".join(c.text for c in entry.content if isinstance(c, TextOutput)), 2000, "\n[...]")
        text = f"[earlier tool call: {entry.title} -> {entry.status.value}]\n{texts}".rstrip()
        return ModelMessage(entry.tool_call_id, ChatMessage("assistant", text))
    return None


def model_transcript(entries: list[HistoryEntry]) -> list[ModelMessage]:
    """What the model is shown of the session so far, its compactions applied, ready to extend.

    Turns recorded as a transcript come back structurally (tool calls and
    results as such, reasoning blocks included); turns from before the
    transcript existed (no model message between their user message and the
    next) keep working, rendered as text.
    """
    messages: list[ModelMessage] = []
    for turn in _turns(entries):
        if any(isinstance(entry, (ModelMessage, ContextCompaction)) for entry in turn):
            for entry in turn:
                if isinstance(entry, ModelMessage):
                    messages.append(entry)
                elif isinstance(entry, ContextCompaction):
                    messages = apply_compaction(messages, entry)
        else:
            messages.extend(legacy for entry in turn if (legacy := _legacy(entry)) is not None)
    return well_formed(messages)


def _turns(entries: list[HistoryEntry]) -> list[list[HistoryEntry]]:
    """The history split where the client's user messages start a turn."""
    turns: list[list[HistoryEntry]] = [[]]
    for entry in entries:
        if isinstance(entry, UserMessage) and turns[-1]:
            turns.append([])
        turns[-1].append(entry)
    return turns
