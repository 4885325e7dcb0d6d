"""write_file and edit_file: change files in the workspace.

Writes go to the canonical path that the workspace rule judged, never to the
raw path the model wrote, and through descriptors (anchored.py), so a symlink
cannot redirect an approved write, not even one swapped in after the decision.
edit_file is an exact, unique string replacement: a match that is missing or
ambiguous is refused with a message that tells the model how to fix the call,
because guessing which occurrence was meant silently corrupts code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from term2.app.tools.anchored import open_regular, read_upto, write_whole
from term2.app.tools.args import ArgumentError, Arguments, optional_bool, required_str
from term2.app.tools.base import Invocation, Outcome, Runner
from term2.app.tools.changes import client_content, may_read, show_change
from term2.app.tools.failure import ToolFailed
from term2.app.tools.files import SNIFF_BYTES, human_size, looks_binary
from term2.app.tools.paths import resolve
from term2.app.tools.plants import git_plant_folder
from term2.app.tools.through_client import client_read, client_write
from term2.domain.history import Location, TextOutput, ToolKind, ToolOutput
from term2.domain.near_match import closest_lines
from term2.domain.truncation import ellipsize, keep_head
from term2.domain.workspace import MAX_DEPTH, Access, too_deep
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext

EDIT_LIMIT = 10 * 1024 * 1024  # a file read to edit or diff, and a file an edit may produce (as read_file's)
HINT_LINE_CHARS = 300  # of each line a near-match hint shows (a minified file's one line is megabytes)
HINT_CHARS = 8 * 1024  # of a whole hint


class NotText(ToolFailed):
    """The existing file cannot be treated as text: edit_file refuses, write_file skips the diff."""


Old = str | None | NotText  # the file's text, no file, or why its content is not text


def _edit_invocation(
    title: str, path: str, root: str, runner: Runner, new_text: Callable[[str | None], str], *, reads_target: bool
) -> Invocation:
    if too_deep(path, root):
        raise ArgumentError(
            f"{path} would sit {len(os.path.relpath(path, root).split('/')) - 1} folders deep in the workspace; "
            f"the sandbox walks at most {MAX_DEPTH - 1}, so term2 makes no deeper path"
        )
    return Invocation(
        title=title,
        access=Access.EDIT,
        target=path,
        grant_folder=os.path.dirname(path),
        locations=(Location(path),),
        run=runner,
        git_plant=git_plant_folder(path, root),
        preview=partial(_preview, path, root, new_text),
        reads_target=reads_target,
    )


def _preview(path: str, root: str, new_text: Callable[[str | None], str]) -> tuple[ToolOutput, ...]:
    """The diff the call would make now, for the user's review; nothing when it would fail (its run says why)."""
    try:
        old = _read_existing(path, root)
        return (client_content(path, old, new_text(old)),)
    except (ToolFailed, OSError, ValueError):  # NotText is a ToolFailed
        return ()


def _replaced(
    path: str, old_string: str, new_string: str, replace_all: bool, old: str | None, *, hints: bool = True
) -> tuple[str, int]:
    """The edited text and the number of replacements; ToolFailed says why the edit cannot apply.

    Without `hints` (the model may not read the file) a failure says nothing of the file's text.
    """
    if old is None:
        raise ToolFailed(f"file not found: {path} (use write_file to create it)")
    count = old.count(old_string)
    if count == 0:
        if not hints:
            raise ToolFailed(
                f"old_string was not found in {path}; term2 shows nothing of its text because reading "
                f"{path} needs the user's approval (ask for it with read_file)"
            )
        raise ToolFailed(_not_found(path, old, old_string))
    if count > 1 and not replace_all:
        times = f"{count} times" if hints else "more than once"
        raise ToolFailed(
            f"old_string matches {times} in {path}; include more surrounding context to make "
            "it unique, or set replace_all to true"
        )
    replaced = count if replace_all else 1
    size = len(old) + replaced * (len(new_string) - len(old_string))
    if size > EDIT_LIMIT:
        grown = f"{human_size(size)} long" if hints else "larger than that"  # a size would tell the match count
        raise ToolFailed(f"the edit would make {path} {grown}; the limit is {human_size(EDIT_LIMIT)}")
    return (old.replace(old_string, new_string) if replace_all else old.replace(old_string, new_string, 1)), count


def _read_existing(path: str, root: str) -> str | None:
    """The current text of `path`, None if absent; refuse what cannot round-trip."""
    try:
        fd = open_regular(path, root, verb="changed")
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        data = b"" if size > EDIT_LIMIT else read_upto(fd, EDIT_LIMIT + 1)
    finally:
        os.close(fd)
    if size > EDIT_LIMIT or len(data) > EDIT_LIMIT:
        raise NotText(
            f"{path} is too large to edit as text ({human_size(max(size, len(data)))}; "
            f"the limit is {human_size(EDIT_LIMIT)})"
        )
    if looks_binary(data):
        raise NotText(f"{path} is a binary file; it cannot be edited as text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotText(f"{path} is not valid UTF-8; it cannot be edited as text") from None


def _disk_old(path: str, root: str) -> Old:
    try:
        return _read_existing(path, root)
    except NotText as why:
        return why


def _client_old(path: str, text: str) -> Old:
    """The editor's text of `path`, held to the disk's rules: the size cap, no binary, UTF-8 that round-trips."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate from the client's JSON
        return NotText(f"{path} is not valid UTF-8; it cannot be edited as text")
    if size > EDIT_LIMIT:
        limit = human_size(EDIT_LIMIT)
        return NotText(f"{path} is too large to edit as text ({human_size(size)}; the limit is {limit})")
    if looks_binary(text[:SNIFF_BYTES].encode("utf-8")):
        return NotText(f"{path} is a binary file; it cannot be edited as text")
    return text


async def _old_text(ctx: ToolContext, path: str, root: str) -> Old:
    """What the file holds now: the editor's buffer where it serves reads (unsaved text included), else the disk.

    Only called after the gate allowed the call, so a path that needs asking reaches the editor only once
    the user said yes; the preview shown before that is the disk's.
    """
    text = await client_read(ctx, path, root)
    if text is not None:
        return _client_old(path, text)
    return await anyio.to_thread.run_sync(partial(_disk_old, path, root), abandon_on_cancel=True)


def _encoded(path: str, text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > EDIT_LIMIT:
        raise ToolFailed(f"{path} would be {human_size(len(data))} long; the limit is {human_size(EDIT_LIMIT)}")
    return data


def _write(path: str, root: str, text: str) -> bool:
    return write_whole(path, root, _encoded(path, text))


async def _commit(ctx: ToolContext, path: str, root: str, planned: _Planned) -> Outcome:
    """Make the planned change: through the editor where it serves writes (its own undoable edit), else the disk."""
    _encoded(path, planned.new)  # the cap holds whoever writes
    if await client_write(ctx, path, root, planned.new):
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

    def prepare(self, args: Arguments, root: str) -> Invocation:
        path = resolve(root, required_str(args, "path"))
        content = required_str(args, "content", allow_empty=True)
        if len(content) > EDIT_LIMIT:
            raise ArgumentError(
                f"content is {human_size(len(content))} long; a file term2 writes is at most {human_size(EDIT_LIMIT)}"
            )
        return _edit_invocation(
            f"Write {path}",
            path,
            root,
            partial(self._run, path, root, content),
            lambda _old: content,
            reads_target=False,
        )

    async def _run(
        self, path: str, root: str, content: str, ctx: ToolContext, call_id: str
    ) -> Outcome:
        readable = may_read(ctx, path)
        # Reading the old text and working out the report change nothing: a cancel abandons them at once.
        old = await _old_text(ctx, path, root)
        planned = await anyio.to_thread.run_sync(
            partial(_plan_write, path, content, old, old_readable=readable), abandon_on_cancel=True
        )
        return await _commit(ctx, path, root, planned)


def write_file(path: str, root: str, content: str, *, old_readable: bool = True) -> Outcome:
    """Create or overwrite `path` on the disk; old content that is not text is replaced without a diff."""
    return _make(path, root, _plan_write(path, content, _disk_old(path, root), old_readable=old_readable))


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
    existed, held text or not, so nothing of what it held reaches the model (the client still gets the diff)."""
    if isinstance(old, NotText):
        why = old
        text = f"Overwrote {path}; its old content is not shown ({why})\n" if old_readable else _unshown(path)
        return _Planned(content, Outcome(text, (TextOutput(text),)))
    if not old_readable:
        return _Planned(content, Outcome(_unshown(path), (client_content(path, old, content),)))
    shown = show_change(path, old, content, "Created" if old is None else "Overwrote", old_readable=True)
    return _Planned(content, Outcome(shown.text, (shown.content,)))


def _unshown(path: str) -> str:
    return f"Wrote {path}; term2 shows nothing of what it held before: reading {path} needs the user's approval\n"


@dataclass(frozen=True, slots=True)
class EditFile:
    name: str = "edit_file"
    kind: ToolKind = ToolKind.EDIT

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Replace an exact string in an existing file. old_string must match the file's text "
                "exactly (whitespace included, without read_file's line-number prefixes) and exactly "
                "once, unless replace_all is true. Include surrounding lines to make it unique."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit."},
                    "old_string": {
                        "type": "string",
                        "description": "Exact text to replace.",
                    },
                    "new_string": {
                        "type": "string",
                        "description": "Replacement text.",
                    },
                    "replace_all": {
                        "type": "boolean",
                        "description": "Replace every occurrence.",
                    },
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str) -> Invocation:
        path = resolve(root, required_str(args, "path"))
        old_string = required_str(args, "old_string")
        new_string = required_str(args, "new_string", allow_empty=True)
        if old_string == new_string:
            raise ArgumentError(
                "old_string and new_string are identical; there is nothing to change"
            )
        replace_all = optional_bool(args, "replace_all")
        runner = partial(self._run, path, root, old_string, new_string, replace_all)

        def change(old: str | None) -> str:  # for the preview, which shows nothing when the edit fails
            return _replaced(path, old_string, new_string, replace_all, old, hints=False)[0]

        return _edit_invocation(f"Edit {path}", path, root, runner, change, reads_target=True)

    async def _run(
        self,
        path: str,
        root: str,
        old_string: str,
        new_string: str,
        replace_all: bool,
        ctx: ToolContext,
        call_id: str,
    ) -> Outcome:
        readable = may_read(ctx, path)
        # Working the edit out (reading, matching, hinting, the report) changes nothing: a cancel abandons it.
        old = await _old_text(ctx, path, root)
        planned = await anyio.to_thread.run_sync(
            partial(_plan_edit, path, old_string, new_string, replace_all, old, old_readable=readable),
            abandon_on_cancel=True,
        )
        return await _commit(ctx, path, root, planned)


def _not_found(path: str, text: str, old_string: str) -> str:
    message = f"old_string was not found in {path}"
    near = closest_lines(text, old_string)
    if near is None:
        return message + "; read the file and copy the text exactly"
    last = near.first_line + len(near.lines) - 1
    numbered = (f"{near.first_line + i:>6}\t{ellipsize(line, HINT_LINE_CHARS)}" for i, line in enumerate(near.lines))
    shown = keep_head("\n".join(numbered), HINT_CHARS, "\n[... more lines]")
    where = f"line {near.first_line}" if last == near.first_line else f"lines {near.first_line}-{last}"
    return (
        f"{message}. The closest text is at {where} (line numbers are not part of the file):\n{shown}\n"
        "Copy the text exactly from there (whitespace included) and call edit_file again."
    )


def edit_file(
    path: str, root: str, old_string: str, new_string: str, replace_all: bool, *, old_readable: bool = True
) -> Outcome:
    """Apply the edit. Without `old_readable` nothing of the file's text reaches the model:
    no closest lines, no count, no patch (the client still gets its diff)."""
    planned = _plan_edit(path, old_string, new_string, replace_all, _disk_old(path, root), old_readable=old_readable)
    return _make(path, root, planned)


def _plan_edit(
    path: str, old_string: str, new_string: str, replace_all: bool, old: Old, *, old_readable: bool
) -> _Planned:
    if isinstance(old, NotText):
        raise old
    new, count = _replaced(path, old_string, new_string, replace_all, old, hints=old_readable)
    before = old or ""  # _replaced refused a missing file
    line = before.count("\n", 0, before.index(old_string)) + 1
    verb = f"Edited ({count} replacements)" if count > 1 and old_readable else "Edited"
    shown = show_change(path, before, new, verb, old_readable=old_readable)
    return _Planned(new, Outcome(shown.text, (shown.content,), locations=(Location(path, line),)))
