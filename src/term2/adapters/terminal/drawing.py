"""How a turn's pieces look on a terminal: one line a tool call, cut outputs, coloured diffs, checklists.

Pure functions from domain values to rich renderables, so the terminal view
and the approval question draw the same things the same way, and tests can
check the drawing without a terminal.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from term2.app.tools import names
from term2.app.tools.sandboxed import TERMINAL_RESET
from term2.domain.diff import fits_an_update, git_patch, too_large_note
from term2.domain.history import DiffOutput, Plan, TerminalOutput, TextOutput, ToolCall, ToolOutput, ToolStatus
from term2.domain.usage import TokenUsage
from term2.domain.visible_text import visible
from term2.ports.updates import Spent

OUTPUT_LINES = 4  # of a command's output: its last lines, where errors and results usually are
DIFF_LINES = 40
TEXT_LINES = 2

STATUS_MARKS: dict[ToolStatus, tuple[str, str]] = {
    ToolStatus.PENDING: ("…", "yellow"),
    ToolStatus.IN_PROGRESS: ("…", "yellow"),
    ToolStatus.COMPLETED: ("✓", "green"),
    ToolStatus.FAILED: ("✗", "red"),
    ToolStatus.CANCELLED: ("⊘", "magenta"),
}

DIFF_STYLES = (("+", "green"), ("-", "red"), ("@@", "cyan"))


def shown(text: str) -> str:
    """`text` from the model, a tool, a command or a server, made safe to print: whatever a terminal would
    obey is written out as an escape instead, so no text can hide or redraw what the user is asked
    (domain/visible_text.py, which the gate also applies to every approval question)."""
    return visible(text)


PLAN_MARKS = {"pending": ("☐", ""), "in_progress": ("◐", "yellow"), "completed": ("☑", "green")}


def tool_line(call: ToolCall, *, nested: bool = False) -> Text:
    """`✓ edit  Edit notes.txt  src/notes.txt:3  completed`: kind, title, location and status on one line."""
    mark, colour = STATUS_MARKS[call.status]
    line = Text("  " if nested else "")
    line.append(mark, style=colour)
    line.append(f" {call.kind.value:<7} ", style="bold")
    line.append(shown(call.title))
    # A location is the exact name (what an editor acts on); a person reads it escaped, as the title names it.
    places = (names.shown(loc.path) + ("" if loc.line is None else f":{loc.line}") for loc in call.locations)
    where = shown(", ".join(places))
    if where and where not in call.title:
        line.append(f"  {where}", style="cyan")
    line.append(f"  {call.status.value.replace('_', ' ')}", style=colour)
    line.no_wrap = True
    line.overflow = "ellipsis"
    return line


def cut_lines(text: str, keep: int, *, tail: bool) -> tuple[list[str], int]:
    """At most `keep` lines of `text` (the last ones when `tail`), and how many were left out."""
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= keep:
        return lines, 0
    kept = lines[-keep:] if tail else lines[:keep]
    return kept, len(lines) - keep


def _last_lines(text: str) -> list[RenderableType]:
    """The end of a command's or program's output, where the sandbox's notices are. The reset before them
    is for a terminal emulator; here every line is escaped, so it would only show as `\\x18\\x1b[0m`."""
    lines, cut = cut_lines(text.replace(TERMINAL_RESET, ""), OUTPUT_LINES, tail=True)
    parts: list[RenderableType] = []
    if cut:
        parts.append(_more(cut, "lines above"))
    parts.extend(Text(f"    {shown(line)}", style="dim", no_wrap=True, overflow="ellipsis") for line in lines)
    return parts


def _more(count: int, what: str) -> Text:
    return Text(f"    … {count} more {what}", style="dim italic")


def command_output(output: TerminalOutput) -> RenderableType:
    """The last few lines of what a command printed, and how it exited."""
    parts = _last_lines(output.output)
    if output.signal is not None:
        parts.append(Text(f"    killed by {output.signal}", style="red"))
    elif output.exit_code not in (None, 0):
        parts.append(Text(f"    exit status {output.exit_code}", style="red"))
    return Group(*parts)


def patch_of(output: DiffOutput) -> str | None:
    """The change as a git patch (the tool's own, or made here for entries recorded before it kept one)."""
    if output.patch is not None:
        return output.patch
    if not fits_an_update(output.old_text, output.new_text):
        return None
    return git_patch(output.path, output.old_text, output.new_text)


def diff(output: DiffOutput, limit: int = DIFF_LINES) -> RenderableType:
    """The patch with additions green and removals red, cut to `limit` lines."""
    patch = patch_of(output)
    if patch is None:
        return Text(f"    {too_large_note(output.path).strip()}", style="dim")
    headers = ("diff --git", "index ", "--- ", "+++ ", "new file mode", "deleted file mode")
    body = [line for line in patch.splitlines() if not line.startswith(headers)]
    lines, cut = cut_lines("\n".join(body), limit, tail=False)
    parts: list[RenderableType] = []
    for line in lines:
        style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "dim")
        parts.append(Text(f"    {shown(line)}", style=style, no_wrap=True, overflow="ellipsis"))
    if cut:
        parts.append(_more(cut, "lines of diff"))
    return Group(*parts)


def tool_output(output: ToolOutput, status: ToolStatus) -> RenderableType | None:
    """What a finished call shows under its line; a read's whole text is the model's, not the user's."""
    if isinstance(output, DiffOutput):
        return diff(output)
    if isinstance(output, TerminalOutput):
        return command_output(output)
    assert isinstance(output, TextOutput)
    if output.printed:  # a program's output, the sandbox's notices last: drawn as a command's, ended well or not
        return Group(*_last_lines(output.text))
    if status is not ToolStatus.FAILED:  # a failure's reason is worth a line; a success's text is for the model
        return None
    lines, cut = cut_lines(output.text, TEXT_LINES, tail=False)
    parts: list[RenderableType] = [
        Text(f"    {shown(line)}", style="red", no_wrap=True, overflow="ellipsis") for line in lines
    ]
    if cut:
        parts.append(_more(cut, "lines"))
    return Group(*parts)


def finished_call(call: ToolCall) -> RenderableType:
    nested = call.parent_id is not None
    shown = [tool_output(c, call.status) for c in call.content]
    return Group(tool_line(call, nested=nested), *(s for s in shown if s is not None))


def checklist(plan: Plan) -> RenderableType:
    lines = [Text("plan", style="bold")]
    for entry in plan.entries:
        mark, colour = PLAN_MARKS[entry.status]
        line = Text(f"  {mark} ", style=colour)
        line.append(shown(entry.content), style="dim" if entry.status == "completed" else "")
        lines.append(line)
    return Group(*lines)


def _tokens(usage: TokenUsage) -> str:
    parts = [f"{usage.input:,} in"]
    if usage.cached:
        parts[0] += f" ({usage.cached:,} cached)"
    parts.append(f"{usage.output:,} out")
    if usage.reasoning:
        parts.append(f"{usage.reasoning:,} thinking")
    return " · ".join(parts)


def _cost(amount: float | None) -> str | None:
    return None if amount is None else f"${amount:.4f}"


def summary(stop_reason: str, spent: Spent | None, context: tuple[int, int, bool] | None) -> Text:
    """The closing line: how the turn ended, its tokens and cost, the session's cost and context.

    Tokens no server counted are never drawn as numbers: a server that sends no usage (llama-cpp-python
    while streaming) gets "usage not reported", and an estimated context is marked as one (issue 33)."""
    good = stop_reason == "end_turn"
    line = Text("── ", style="dim")
    line.append(stop_reason.replace("_", " "), style="green" if good else "bold red")
    if spent is not None and not spent.reported and spent.requests:
        line.append(" · usage not reported", style="dim")
    elif spent is not None:
        line.append(f" · {_tokens(spent.turn)}", style="dim")
        turn_cost, session_cost = _cost(spent.turn_cost), _cost(spent.session_cost)
        if turn_cost is not None:
            line.append(f" · {turn_cost}", style="dim")
            if session_cost is not None and session_cost != turn_cost:
                line.append(f" (session {session_cost})", style="dim")
    if context is not None and context[1]:
        used, size, estimated = context
        about = "about " if estimated else ""
        line.append(f" · context {about}{used * 100 // size}% of {size:,}", style="dim")
        if estimated:
            line.append(" (estimated)", style="dim")
    return line
