"""write_file, edit_file and multi_edit: change files in the workspace.

Writes go to the canonical path that the workspace rule judged, never to the
raw path the model wrote, and through descriptors (anchored.py), so a symlink
cannot redirect an approved write, not even one swapped in after the decision.
edit_file replaces one place: the exact text, or, when that is not in the
file, the one place the tolerance chain finds (domain/tolerant_match.py,
ADR 0027), and the result says what was forgiven. A match that is missing or
found in two places or more is refused with a message that tells the model
how to fix the call, because guessing which place was meant silently
corrupts code. multi_edit applies several such edits to one file, all or
none. The file keeps its line endings, BOM, final newline and mode.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from term2.app.tools import names
from term2.app.tools.anchored import write_whole
from term2.app.tools.args import ArgumentError, Arguments, optional_bool, required_str
from term2.app.tools.base import Invocation, Outcome, Runner
from term2.app.tools.changes import client_content, may_read, not_applied, show_change
from term2.app.tools.edit_refusals import forgiven, refusal
from term2.app.tools.edit_texts import EDIT_LIMIT, NotText, Old, disk_old, encoded, old_text, read_existing
from term2.app.tools.editor_turn import one_source
from term2.app.tools.failure import ToolFailed
from term2.app.tools.files import human_size
from term2.app.tools.paths import resolve_shown
from term2.app.tools.plants import git_plant_folder
from term2.app.tools.through_client import client_write, reader
from term2.domain.bounded_match import Budget
from term2.domain.history import TextOutput, ToolKind, ToolOutput
from term2.domain.line_endings import styled_like
from term2.domain.roots import anchor
from term2.domain.text_edits import Applied, Edit, Refused, apply_edits
from term2.domain.tolerant_match import TOLERANCE_STEPS
from term2.domain.workspace import MAX_DEPTH, Access, too_deep
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext

MAX_EDITS = 100  # edits in one multi_edit call


class Reviewed:
    """The change the user was shown before deciding, so that the change made is that one (ADR 0027).

    The preview is worked out from the disk before the question; the run, once allowed, from what the file
    holds then (the editor's buffer, or a disk changed meanwhile). A run whose result differs from the one
    shown writes nothing: the user approved a diff, not an intent.
    """

    __slots__ = ("asked", "new")

    def __init__(self) -> None:
        self.asked = False
        self.new: object = None  # the change shown (a text, or a patch's texts); None: it could not be worked out

    def shown(self, new: object) -> None:
        self.asked, self.new = True, new

    def check(self, path: str, new: object) -> None:
        if self.asked and self.new != new:
            name = names.shown(path)
            raise ToolFailed(
                f"{name} changed after the user was shown this change (or the editor holds unsaved changes), so "
                "the change would no longer be the one approved; nothing was written. Read the file and call again."
            )


def _edit_invocation(
    title: str,
    path: str,
    root: str,
    runner: Runner,
    new_text: Callable[[str | None], str],
    *,
    reviewed: Reviewed | None = None,
) -> Invocation:
    if too_deep(path, root):
        name = names.shown(path)
        raise ArgumentError(
            f"{name} would sit {len(os.path.relpath(path, root).split('/')) - 1} folders deep in the workspace; "
            f"the sandbox walks at most {MAX_DEPTH - 1}, so term2 makes no deeper path"
        )
    return Invocation(
        title=title,
        access=Access.EDIT,
        target=path,
        grant_folder=os.path.dirname(path),
        locations=names.located(path),
        run=runner,
        git_plant=git_plant_folder(path, root),
        preview=partial(_preview, path, root, new_text, reviewed),
    )


def _preview(
    path: str, root: str, new_text: Callable[[str | None], str], reviewed: Reviewed | None
) -> tuple[ToolOutput, ...]:
    """The diff the call would make now, for the user's review; nothing when it would fail (its run says why)."""
    try:
        old = read_existing(path, root)
        new = new_text(old)
    except (ToolFailed, OSError, ValueError):  # NotText is a ToolFailed
        if reviewed is not None:
            reviewed.shown(None)
        return ()
    if reviewed is not None:
        reviewed.shown(new)
    return (client_content(path, old, new),)


def _write(path: str, root: str, text: str) -> bool:
    return write_whole(path, root, encoded(path, text))


async def _commit(
    ctx: ToolContext, path: str, root: str, planned: _Planned, reviewed: Reviewed | None = None
) -> Outcome:
    """Make the planned change: through the editor where it serves writes (its own undoable edit), else the disk."""
    encoded(path, planned.new)  # the cap holds whoever writes
    if reviewed is not None:
        reviewed.check(path, planned.new)
    # Inside one_source a client left in the context read the old text (unless it refused): keep to one side.
    if await client_write(ctx, path, root, planned.new, buffer_based=reader(ctx, path) is not None):
        return planned.outcome
    return await anyio.to_thread.run_sync(partial(_make, path, root, planned))


@dataclass(frozen=True, slots=True)
class WriteFile:
    name: str = "write_file"
    kind: ToolKind = ToolKind.EDIT

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Create a file, or overwrite it entirely, with the given UTF-8 text. Missing parent "
                "folders are created. Prefer edit_file for changing part of an existing file."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write."},
                    "content": {
                        "type": "string",
                        "description": "The complete new content.",
                    },
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        path = resolve_shown(root, required_str(args, "path"))
        root = anchor(path, root, extra_roots)  # judged and written from the root that holds it
        content = required_str(args, "content", allow_empty=True)
        if len(content) > EDIT_LIMIT:
            raise ArgumentError(
                f"content is {human_size(len(content))} long; a file term2 writes is at most {human_size(EDIT_LIMIT)}"
            )
        return _edit_invocation(
            f"Write {names.shown(path)}",
            path,
            root,
            partial(self._run, path, root, content),
            partial(styled_like, content=content),
        )

    async def _run(self, path: str, root: str, content: str, ctx: ToolContext, call_id: str) -> Outcome:
        readable = may_read(ctx, path)
        async with one_source(ctx, path) as ctx:
            # Reading the old text and working out the report change nothing: a cancel abandons them at once.
            old = await old_text(ctx, path, root)
            planned = await anyio.to_thread.run_sync(
                partial(_plan_write, path, content, old, old_readable=readable), abandon_on_cancel=True
            )
            return await _commit(ctx, path, root, planned)


def write_file(path: str, root: str, content: str, *, old_readable: bool = True) -> Outcome:
    """Create or overwrite `path` on the disk; old content that is not text is replaced without a diff."""
    return _make(path, root, _plan_write(path, content, disk_old(path, root), old_readable=old_readable))


@dataclass(frozen=True, slots=True)
class _Planned:
    """A change worked out, its report included, and not yet made: up to here a cancel may abandon it."""

    new: str
    outcome: Outcome


def _make(path: str, root: str, planned: _Planned) -> Outcome:
    """The only step that changes anything: a write of bounded size, then the report worked out before it."""
    _write(path, root, planned.new)
    return planned.outcome


def _plan_write(path: str, content: str, old: Old, *, old_readable: bool) -> _Planned:
    """Without `old_readable` the model is told only that the file was written: the same words whether it
    existed, held text or not, so nothing of what it held reaches the model (the client still gets the diff).
    A file that uses CRLF only keeps it, and a BOM stays (line_endings.styled_like)."""
    content = styled_like(old if isinstance(old, str) else None, content)
    if isinstance(old, NotText):
        why = old
        text = (
            f"Overwrote {names.shown(path)}; its old content is not shown ({why})\n" if old_readable else _unshown(path)
        )
        return _Planned(content, Outcome(text, (TextOutput(text),)))
    if not old_readable:
        return _Planned(content, Outcome(_unshown(path), (client_content(path, old, content),)))
    shown = show_change(path, old, content, "Created" if old is None else "Overwrote", old_readable=True)
    return _Planned(content, Outcome(shown.text, (shown.content,)))


def _unshown(path: str) -> str:
    name = names.shown(path)
    return f"Wrote {name}; term2 shows nothing of what it held before: reading {name} needs the user's approval\n"


_OLD_STRING = {"type": "string", "description": "The text to replace, copied from the file."}
_NEW_STRING = {"type": "string", "description": "Replacement text."}
_REPLACE_ALL = {"type": "boolean", "description": "Replace every exact occurrence."}


@dataclass(frozen=True, slots=True)
class EditFile:
    name: str = "edit_file"
    kind: ToolKind = ToolKind.EDIT

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Replace a string in an existing file. Copy old_string from the file (without read_file's "
                "line-number prefixes), with enough surrounding lines that it occurs exactly once, unless "
                "replace_all is true. Small slips (indentation, trailing spaces, tabs, quotes) are forgiven only "
                "when they leave exactly one place; the result then says what was forgiven."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit."},
                    "old_string": _OLD_STRING,
                    "new_string": _NEW_STRING,
                    "replace_all": _REPLACE_ALL,
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        path = resolve_shown(root, required_str(args, "path"))
        root = anchor(path, root, extra_roots)  # judged and written from the root that holds it
        return _edits_invocation(path, root, (_edit(args, ""),), f"Edit {names.shown(path)}")


@dataclass(frozen=True, slots=True)
class MultiEdit:
    name: str = "multi_edit"
    kind: ToolKind = ToolKind.EDIT

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Make several edit_file edits to one file in one call: each is applied, in order, to the text "
                "the ones before it left; if any cannot be applied, none is. Each old_string follows "
                "edit_file's rules."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit."},
                    "edits": {
                        "type": "array",
                        "description": "The edits, in order.",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "old_string": _OLD_STRING,
                                "new_string": _NEW_STRING,
                                "replace_all": _REPLACE_ALL,
                            },
                            "required": ["old_string", "new_string"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["path", "edits"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        path = resolve_shown(root, required_str(args, "path"))
        root = anchor(path, root, extra_roots)  # judged and written from the root that holds it
        raw = args.get("edits")
        if not isinstance(raw, list) or not raw:
            raise ArgumentError("argument 'edits' must be a non-empty list of {old_string, new_string} objects")
        if len(raw) > MAX_EDITS:
            raise ArgumentError(f"argument 'edits' has {len(raw)} edits; one call makes at most {MAX_EDITS}")
        edits = []
        for number, item in enumerate(raw, start=1):
            if not isinstance(item, dict):
                raise ArgumentError(f"edit {number} must be an object with old_string and new_string")
            edits.append(_edit(item, f"edit {number}: "))
        return _edits_invocation(path, root, tuple(edits), f"Edit {names.shown(path)} ({len(edits)} edits)")


def _edit(args: Arguments, where: str) -> Edit:
    try:
        old_string = required_str(args, "old_string")
        new_string = required_str(args, "new_string", allow_empty=True)
        replace_all = optional_bool(args, "replace_all")
    except ArgumentError as err:
        raise ArgumentError(f"{where}{err}") from None
    if old_string == new_string:
        raise ArgumentError(f"{where}old_string and new_string are identical; there is nothing to change")
    if len(old_string) > EDIT_LIMIT or len(new_string) > EDIT_LIMIT:
        raise ArgumentError(f"{where}a string is longer than a file term2 edits ({human_size(EDIT_LIMIT)})")
    return Edit(old_string, new_string, replace_all)


def _edits_invocation(path: str, root: str, edits: tuple[Edit, ...], title: str) -> Invocation:
    reviewed = Reviewed()
    runner = partial(_run_edits, path, root, edits, reviewed)

    def change(old: str | None) -> str:  # for the preview, which shows nothing when the edit fails
        return _plan_edits(path, edits, old, old_readable=False).new

    return _edit_invocation(title, path, root, runner, change, reviewed=reviewed)


async def _run_edits(
    path: str, root: str, edits: tuple[Edit, ...], reviewed: Reviewed, ctx: ToolContext, call_id: str
) -> Outcome:
    readable = may_read(ctx, path)
    async with one_source(ctx, path) as ctx:
        # Working the edit out (reading, matching, hinting, the report) changes nothing: a cancel abandons it.
        old = await old_text(ctx, path, root)
        planned = await anyio.to_thread.run_sync(
            partial(_plan_edits, path, edits, old, old_readable=readable), abandon_on_cancel=True
        )
        return await _commit(ctx, path, root, planned, reviewed)


def edit_file(
    path: str, root: str, old_string: str, new_string: str, replace_all: bool, *, old_readable: bool = True
) -> Outcome:
    """Apply the edit. Without `old_readable` nothing of the file's text reaches the model:
    no closest lines, no count, no patch (the client still gets its diff)."""
    edits = (Edit(old_string, new_string, replace_all),)
    return _make(path, root, _plan_edits(path, edits, disk_old(path, root), old_readable=old_readable))


EDIT_RULE = (
    f"Each old_string must match exactly one place in the file (or set replace_all), the file must exist as "
    f"UTF-8 text, and the edited file may be at most {human_size(EDIT_LIMIT)}."
)


def _plan_edits(path: str, edits: tuple[Edit, ...], old: Old, *, old_readable: bool) -> _Planned:
    """Work the edits out; where the model may not read the file, a failure of any kind says only that the
    edits did not apply (not which one, nor why), and a success only that they did (ADR 0042)."""
    unread = None if old_readable else not_applied(path, "The edit" if len(edits) == 1 else "The edits", EDIT_RULE)
    if isinstance(old, NotText):
        raise ToolFailed(unread) if unread else old
    if old is None:
        raise ToolFailed(unread or f"file not found: {names.shown(path)} (use write_file to create it)")
    result = apply_edits(old, edits, Budget(TOLERANCE_STEPS), EDIT_LIMIT)
    if isinstance(result, Refused):
        raise ToolFailed(unread or refusal(path, edits, result))
    if not isinstance(result, Applied):
        raise ToolFailed(
            unread
            or f"the edit would make {names.shown(path)} {human_size(result.size)} long; "
            f"the limit is {human_size(EDIT_LIMIT)}"
        )
    if unread and len(result.text.encode("utf-8")) > EDIT_LIMIT:  # _commit's cap would say the size
        raise ToolFailed(unread)
    verb = f"Edited ({result.count} replacements)" if result.count > len(edits) and old_readable else "Edited"
    shown = show_change(path, old, result.text, verb, old_readable=old_readable)
    text = shown.text
    if old_readable and result.tolerances:
        text = forgiven(edits, result.tolerances) + text
    return _Planned(result.text, Outcome(text, (shown.content,), locations=names.located(path, result.first_line)))
