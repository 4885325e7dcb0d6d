"""The file tools' reads and writes through the user's editor, where it offers them (ADR 0024).

By the time anything here runs, the tool gate has judged the canonical path
(workspace rule, approvals, grants, secrets, git metadata, instruction
files); this module only chooses who touches the file. An editor that serves
`fs/read_text_file` answers with its buffer (unsaved edits included), and one
that serves `fs/write_text_file` applies the text as its own undoable edit.

ADR 0009's guarantee (the object judged is the object touched) cannot ride on
a descriptor the editor never sees. What keeps the path string pointing at
the object judged is the editor's turn (editor_turn.py, ADR 0038): the
request is sent only while no sandboxed program that could write a folder on
its way runs, in any session or term2 process of the user; otherwise the disk
serves the call. Inside the turn the path is walked by descriptors from the
root just before (a symlink on the way is a swap and nothing is sent; a
write's missing folders are made there) and again just after (what changed
meanwhile is the user's own doing, reported, never taken as success).
run_code's nested calls keep the disk (bridge.py): their own program runs.

A client that refuses a path (outside its project, not found, any error
answer) did nothing: the disk serves the call, and the log says so. A path
that is not UTF-8 is never sent: ACP names files with JSON strings, which
have no exact form for it (a client would read its bytes as U+FFFD and act
on another file), so the disk serves it. A write
whose answer never comes is not retried on the disk: it may have happened.
"""

from __future__ import annotations

import os
from functools import partial

import anyio
import anyio.to_thread

from term2.app.tools.anchored import lstat_in, open_parent, open_regular, read_upto, require_regular
from term2.app.tools.editor_turn import editor_turn
from term2.app.tools.failure import ToolFailed
from term2.app.tools.files import SNIFF_BYTES, looks_binary
from term2.app.tools.names import shown
from term2.ports.client_files import ClientFileError, ClientFiles
from term2.ports.tools import ToolContext
from term2.support.deferred_log import get_logger

log = get_logger("term2.tools")

# How long a write may wait for the editor's answer. The wait is shielded from a cancel (like the disk's
# write, ADR 0019: a change that may have been made is reported, not abandoned), so it must be bounded.
WRITE_WAIT_S = 60.0
# How long a read may wait for the editor's answer: a command waits for editor requests in flight on its
# folders (ADR 0038), so every request is bounded. A read that times out is served by the disk.
READ_WAIT_S = 60.0


def reader(ctx: ToolContext, path: str) -> ClientFiles | None:
    files = ctx.client_files
    return files if files is not None and files.reads and _nameable(path) else None


def writer(ctx: ToolContext, path: str) -> ClientFiles | None:
    files = ctx.client_files
    return files if files is not None and files.writes and _nameable(path) else None


def _nameable(path: str) -> bool:
    """Whether the editor can be told `path` exactly: a name that is not UTF-8 has no JSON string."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def client_read(
    ctx: ToolContext, path: str, root: str, *, line: int | None = None, limit: int | None = None
) -> str | None:
    """The editor's text of the canonical `path` (lines from `line`, at most `limit`), or None: the disk answers.

    None when the client does not read, refuses the path, or the disk holds a binary file there (the disk's
    read refuses it, in its own words). A swap before or after the request raises ToolFailed.
    """
    files = reader(ctx, path)
    if files is None:
        return None
    async with editor_turn(ctx, path) as held:
        if not held:
            return None
        if await anyio.to_thread.run_sync(partial(_binary_on_disk, path, root), abandon_on_cancel=True):
            return None
        with anyio.move_on_after(READ_WAIT_S) as waited:
            try:
                text = await files.read_text(ctx.session_id, path, line=line, limit=limit)
            except ClientFileError as err:
                log.info("the client did not read the file; term2 reads the disk", path=path, reason=str(err))
                return None
        if waited.cancelled_caught:
            log.warning("the client did not answer a read in time; term2 reads the disk", path=path)
            return None
        await anyio.to_thread.run_sync(partial(_still_judged, path, root), abandon_on_cancel=True)
    return text


async def client_write(ctx: ToolContext, path: str, root: str, text: str, *, buffer_based: bool = False) -> bool:
    """Have the editor make `text` the content of the canonical `path`; False when the disk must write it.

    False when the client does not write or answered with an error (it did nothing). ToolFailed when a swap
    is found before (nothing is sent) or after (the write is reported as not trusted), or when the editor
    never answered: then the write may or may not have happened, and the disk is not written. ToolFailed
    too when `text` was worked out from the editor's buffer (`buffer_based`) but a sandboxed program now
    keeps the editor off: the disk must not get a buffer's text (nor the buffer the disk's), so nothing is
    written.
    """
    files = writer(ctx, path)
    if files is None:
        return False
    await anyio.to_thread.run_sync(partial(_ready_for_write, path, root))  # makes the folders the way needs
    async with editor_turn(ctx, path) as held:
        if not held and buffer_based:
            raise ToolFailed(
                f"a command started on a folder of {shown(path)} while the edit was worked out from the editor's "
                "text; nothing was written: try again once it ends"
            )
        if not held:
            return False
        await anyio.to_thread.run_sync(partial(_ready_for_write, path, root))
        with anyio.move_on_after(WRITE_WAIT_S, shield=True) as waited:
            try:
                await files.write_text(ctx.session_id, path, text)
            except ClientFileError as err:
                if not err.answered:
                    raise ToolFailed(
                        f"the editor went away while writing {shown(path)}; whether it changed is unknown ({err})"
                    ) from None
                log.warning("the client did not write the file; term2 writes the disk", path=path, reason=str(err))
                return False
        if waited.cancelled_caught:
            raise ToolFailed(
                f"the editor did not answer within {WRITE_WAIT_S:.0f} s while writing {shown(path)}; whether it "
                "changed is unknown, and term2 did not write it itself"
            )
        try:
            await anyio.to_thread.run_sync(partial(_still_judged, path, root))
        except (ToolFailed, OSError) as err:
            log.warning("the path changed while the client wrote it", path=path, error=str(err))
            raise ToolFailed(
                f"the editor wrote {shown(path)}, but the path changed meanwhile ({err}); check it"
            ) from None
    log.info("the client wrote the file", path=path)
    return True


def _binary_on_disk(path: str, root: str) -> bool:
    """Walk to `path` by descriptors (a swap raises); True when a file there looks binary."""
    try:
        fd = open_regular(path, root)
    except FileNotFoundError:
        return False  # the editor may still hold it (or says it does not)
    try:
        return looks_binary(read_upto(fd, SNIFF_BYTES))
    finally:
        os.close(fd)


def _ready_for_write(path: str, root: str) -> None:
    """Make the missing folders by descriptors and refuse a symlink or special file at `path`."""
    folder_fd, name = open_parent(path, root, create=True)
    try:
        try:
            info = lstat_in(folder_fd, name, path)
        except FileNotFoundError:
            return
        require_regular(info, path, "written")
    finally:
        os.close(folder_fd)


def _still_judged(path: str, root: str) -> None:
    """After the client acted: `path` still leads where it was judged to, with no symlink on the way.

    A missing file is no swap: an editor may keep a write in its buffer, unsaved, as it may hold text it never
    saved (the protocol asks it to apply the text, not to save it).
    """
    try:
        folder_fd, name = open_parent(path, root)
    except FileNotFoundError:
        return
    try:
        try:
            info = lstat_in(folder_fd, name, path)
        except FileNotFoundError:
            return
        require_regular(info, path, "read")
    finally:
        os.close(folder_fd)
