"""What the model is shown: the system prompt and the session's transcript.

The prompt's text is a Markdown file of its own (`prompts/system.md`, a
`string.Template`), so that it can be read, reviewed and diffed as prose; a
unit test pins its rendered form against a committed snapshot.
"""

from __future__ import annotations

import functools
import platform
import string
from dataclasses import replace
from datetime import date
from importlib import resources

from term2.domain.content import images_of, render_for_model
from term2.domain.history import AgentMessage, HistoryEntry, TextOutput, ToolCall, UserMessage
from term2.domain.transcript import ChatMessage, ContextCompaction, ModelMessage, apply_compaction, well_formed
from term2.domain.truncation import keep_head
from term2.ports.llm import ToolSpec


@functools.cache
def _template() -> string.Template:
    return string.Template(resources.files("term2.app.prompts").joinpath("system.md").read_text("utf-8"))


# How to change files, for each edit tool a model may be offered (app/edit_tools.py): the prompt teaches
# the ones the session has, and only those.
_EDIT_TOOLS = {
    "edit_file": (
        "- `edit_file` replaces a string that must occur exactly once (unless `replace_all`): copy it from the "
        "file, whitespace included, with enough surrounding lines to be unique. It is the right tool for changing "
        "an existing file. A small slip (indentation, trailing spaces, tabs for spaces, curly quotes) is forgiven "
        "only when it leaves exactly one place, and the result then says what was forgiven: check its diff."
    ),
    "multi_edit": (
        "- `multi_edit` makes several `edit_file` edits to one file in one call, in order, all or none: use it "
        "instead of a series of `edit_file` calls on the same file."
    ),
    "apply_patch": (
        "- `apply_patch` changes files with one patch in the `*** Begin Patch` format (add, delete, rename and "
        "update files, whole or not at all). Give each hunk about three lines of context, in file order, and an "
        "`@@` line naming the function or class when the context alone could match twice. It is the right tool "
        "for changing existing files."
    ),
}
_WRITE_FILE = (
    "`write_file` creates a file or replaces it whole: use it for new files, or when nearly all of a file changes."
)


def _edit_tools(names: set[str]) -> str:
    taught = [text for name, text in _EDIT_TOOLS.items() if name in names]
    if "write_file" in names:
        taught.append("- " + _WRITE_FILE)
    return "\n".join(taught)


def render_system_prompt(
    *, root: str, platform_name: str, today: str, tools: tuple[ToolSpec, ...], instructions: str
) -> str:
    """The prompt from `prompts/system.md`, then the project's instructions section when it has one."""
    names = ", ".join(t.name for t in tools) or "none"
    text = _template().substitute(
        workspace_root=root,
        platform=platform_name,
        date=today,
        tool_names=names,
        edit_tools=_edit_tools({t.name for t in tools}),
    )
    return text.rstrip("\n") + ("\n\n" + instructions if instructions else "") + "\n"


PLANNING = """\
# Read-only mode (planning)

This turn runs in read-only mode: the user is planning with you. You can read and search; every edit, \
write, command, program and MCP call is refused without the user being asked, and nothing changes. Do \
not try them. Investigate, then answer with a concrete plan: the files and functions to change, how, in \
what order, and how to check the result. The user switches the mode when they want the plan carried out."""


ROOTS_NOTE = (
    "\n- Additional workspace roots: {roots}. Each is a workspace root like the first, with the same rules: "
    "read, edit and run commands in it as in the workspace root (give `cwd` to run there); relative paths stay "
    "relative to the workspace root, so name files in the others by their absolute path."
)


def system_prompt(
    root: str,
    tools: tuple[ToolSpec, ...],
    instructions: str = "",
    *,
    planning: bool = False,
    extra_roots: tuple[str, ...] = (),
) -> str:
    """The system message for a turn: the facts that vary (platform, today's date) filled in here; a
    read-only turn (ADR 0044) is told it is planning, so the model does not spend it on refused calls.
    The editor's additional directories (ADR 0051) are listed beside the root, or the model would take
    every path outside the root for one it must ask about."""
    text = render_system_prompt(
        root=root + (ROOTS_NOTE.format(roots=", ".join(extra_roots)) if extra_roots else ""),
        platform_name=f"{platform.system()} {platform.machine()}",
        today=date.today().isoformat(),
        tools=tools,
        instructions=instructions,
    )
    return text + "\n" + PLANNING + "\n" if planning else text


def _legacy(entry: HistoryEntry) -> ModelMessage | None:
    """A turn stored before the transcript was (term2 < 0.2): as text, so any provider accepts it."""
    if isinstance(entry, UserMessage):
        text = render_for_model(entry.content)
        return ModelMessage(entry.message_id, ChatMessage("user", text, images=images_of(entry.content)))
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
            images = images_of(turn[0].content) if isinstance(turn[0], UserMessage) else ()
            for entry in turn:
                if isinstance(entry, ModelMessage):
                    if images and entry.message.role == "user":  # the prompt: its images are kept once, in the
                        messages.append(ModelMessage(entry.message_id, replace(entry.message, images=images)))
                        images = ()  # user's message (`Transcript.add`'s `stored`)
                    else:
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
