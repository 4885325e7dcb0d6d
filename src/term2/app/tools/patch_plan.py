"""What an apply_patch call would write, worked out before anything is written (ADR 0027).

`plan` turns the patch's files and what each holds now into the changes `patch_commit` makes, or fails
with why: a hunk placed by edit_file's tolerance chain, each below the one before it; where the model
may not read a file, only that the patch did or did not apply to it (ADR 0042). Nothing here touches
the disk: `patch.py` reads what the files hold and commits the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from term2.app.tools import names
from term2.app.tools.changes import client_content, not_applied, show_change
from term2.app.tools.edit_refusals import ambiguity, not_found
from term2.app.tools.edit_texts import EDIT_LIMIT, NotText, Old, encoded
from term2.app.tools.failure import ToolFailed
from term2.app.tools.files import human_size
from term2.app.tools.patch_commit import PlannedChange
from term2.domain.bounded_match import Budget
from term2.domain.history import TextOutput
from term2.domain.line_endings import styled_like
from term2.domain.patch_grammar import AddFile, DeleteFile, FileOp, UpdateFile
from term2.domain.text_edits import Applied, Refused, apply_chunks
from term2.domain.tolerant_match import TOLERANCE_STEPS, Ambiguous

WHOLE = "nothing was changed (a patch applies whole or not at all)"
PATCH_RULE = (
    "A patch applies whole or not at all: every hunk's context and '-' lines must match one place, each "
    "below the one before it, the file must exist as UTF-8 text, and the patched file may be at most "
    f"{human_size(EDIT_LIMIT)}."
)


@dataclass(frozen=True, slots=True)
class PatchTarget:
    """One file of a patch: its operation and canonical path, and where `*** Move to:` puts it."""

    op: FileOp
    path: str  # canonical
    dest: str | None = None  # canonical `*** Move to:`


def plan(
    targets: tuple[PatchTarget, ...], olds: dict[str, Old], modes: dict[str, int], *, readable: dict[str, bool]
) -> list[PlannedChange]:
    budget = Budget(TOLERANCE_STEPS)
    changes: list[PlannedChange] = []
    for target in targets:
        op, path = target.op, target.path
        old = olds[path]
        if isinstance(op, AddFile):
            changes.append(_added(path, op.content, old, readable[path]))
        elif isinstance(op, DeleteFile):
            changes.append(_deleted(path, old, readable[path]))
        else:
            changes += _updated(target, op, old, olds, modes, budget, readable)
    return changes


def _added(path: str, content: str, old: Old, readable: bool) -> PlannedChange:
    new = styled_like(old if isinstance(old, str) else None, content)
    encoded(path, new)
    if isinstance(old, NotText):
        text = (
            f"Overwrote {names.shown(path)}; its old content is not shown ({old})\n"
            if readable
            else _unshown(path, "Wrote")
        )
        return PlannedChange(path, new, text, TextOutput(text), 1)
    if not readable:  # the same words whether a file was there: its existence is something of its folder
        return PlannedChange(path, new, _unshown(path, "Wrote"), client_content(path, old, new), 1)
    shown = show_change(path, old, new, "Created" if old is None else "Overwrote", old_readable=True)
    return PlannedChange(path, new, shown.text, shown.content, 1)


def _deleted(path: str, old: Old, readable: bool) -> PlannedChange:
    if old is None:  # whether a file exists is something of what a folder holds
        raise ToolFailed(
            f"there is no file {names.shown(path)} to delete; {WHOLE}"
            if readable
            else not_applied(path, "The patch", PATCH_RULE)
        )
    if isinstance(old, NotText):
        text = f"Deleted {names.shown(path)} ({old})\n" if readable else _unshown(path, "Deleted")
        return PlannedChange(path, None, text, TextOutput(text))
    if not readable:
        return PlannedChange(path, None, _unshown(path, "Deleted"), client_content(path, old, ""))
    shown = show_change(path, old, "", "Deleted", old_readable=True)
    return PlannedChange(path, None, shown.text, shown.content)


def _updated(
    target: PatchTarget,
    op: UpdateFile,
    old: Old,
    olds: dict[str, Old],
    modes: dict[str, int],
    budget: Budget,
    readable: dict[str, bool],
) -> list[PlannedChange]:
    """One updated (and perhaps moved) file; where the model may not read it, any failure says only that the
    patch did not apply to it, and a success only that it did (ADR 0042)."""
    path, dest = target.path, target.dest
    hints = readable[path]
    unread = None if hints else not_applied(path, "The patch", PATCH_RULE)
    if isinstance(old, NotText):
        raise ToolFailed(unread or f"{old}; {WHOLE}")
    if old is None:
        raise ToolFailed(unread or f"file not found: {names.shown(path)} (use *** Add File: to create it); {WHOLE}")
    if dest is not None and olds[dest] is not None:
        raise ToolFailed(
            unread
            or f"*** Move to: {names.shown(dest)} already exists; term2 does not replace a file by moving; {WHOLE}"
        )
    result = apply_chunks(old, op.chunks, budget, EDIT_LIMIT) if op.chunks else Applied(old, 1, 0, ())
    if isinstance(result, Refused):
        raise ToolFailed(unread or _refusal(path, op, result))
    if not isinstance(result, Applied):
        grown = f"{human_size(result.size)} long"
        raise ToolFailed(
            unread
            or f"the patch would make {names.shown(path)} {grown}; the limit is {human_size(EDIT_LIMIT)}; {WHOLE}"
        )
    if unread and len(result.text.encode("utf-8")) > EDIT_LIMIT:  # encoded() below would say the size
        raise ToolFailed(unread)
    new = result.text
    encoded(path, new)
    name = names.shown(path)
    forgiven = "".join(
        f"{name}: hunk {index + 1} did not match exactly; it matched one place after {how}. Check the diff.\n"
        for index, how in result.tolerances
    ) if hints else ""  # fmt: skip
    if dest is None:
        shown = show_change(path, old, new, "Edited", old_readable=hints)
        return [PlannedChange(path, new, forgiven + shown.text, shown.content, result.first_line)]
    moved = show_change(dest, old, new, f"Moved {names.shown(path)} to", old_readable=hints)
    mode = modes.get(path, 0o644)
    gone = PlannedChange(path, None, "", client_content(path, old, ""), mode=mode)
    return [gone, PlannedChange(dest, new, forgiven + moved.text, moved.content, result.first_line, mode)]


def _unshown(path: str, verb: str) -> str:
    name = names.shown(path)
    return f"{verb} {name}; term2 shows nothing of what it held before: reading {name} needs the user's approval\n"


def _refusal(path: str, op: UpdateFile, refused: Refused) -> str:
    """Why a hunk of a file the model may read could not be placed, with the places or the closest lines."""
    number = refused.index + 1
    chunk = op.chunks[refused.index]
    why = refused.why
    if refused.header is not None:
        subject = f"the @@ line {refused.header!r} of hunk {number}"
    else:
        subject = f"hunk {number}'s context and '-' lines"
    if isinstance(why, Ambiguous):
        message = ambiguity(path, refused.text, why, subject) + (
            ", or put an @@ line naming the function or class above the change"
        )
    else:
        wanted = refused.header if refused.header is not None else "\n".join(chunk.old)
        message = not_found(path, refused.text, wanted, subject=subject, tool="apply_patch")
        if why.why is not None:
            message += f" ({why.why})"
    order = " Hunks are looked for in order, each below the one before it." if refused.index else ""
    return f"{message}{order}\n{WHOLE}"
