"""What a file holds before an edit, from the disk or the editor, held to one set of rules.

Both sources answer the same way (the size cap, no binary, UTF-8 that round-trips), so an edit works out
the same change whichever served it; what is not text says why, for edit_file to refuse and write_file to
write without a diff.
"""

from __future__ import annotations

import os
from functools import partial

import anyio.to_thread

from term2.app.tools import names
from term2.app.tools.anchored import open_regular, read_upto
from term2.app.tools.failure import ToolFailed
from term2.app.tools.files import SNIFF_BYTES, human_size, looks_binary
from term2.app.tools.through_client import client_read
from term2.ports.tools import ToolContext

EDIT_LIMIT = 10 * 1024 * 1024  # a file read to edit or diff, and a file an edit may produce (as read_file's)


class NotText(ToolFailed):
    """The existing file cannot be treated as text: edit_file refuses, write_file skips the diff."""


Old = str | None | NotText  # the file's text, no file, or why its content is not text


def read_existing(path: str, root: str) -> str | None:
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
            f"{names.shown(path)} is too large to edit as text ({human_size(max(size, len(data)))}; "
            f"the limit is {human_size(EDIT_LIMIT)})"
        )
    if looks_binary(data):
        raise NotText(f"{names.shown(path)} is a binary file; it cannot be edited as text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotText(f"{names.shown(path)} is not valid UTF-8; it cannot be edited as text") from None


def disk_old(path: str, root: str) -> Old:
    try:
        return read_existing(path, root)
    except NotText as why:
        return why


def client_old(path: str, text: str) -> Old:
    """The editor's text of `path`, held to the disk's rules: the size cap, no binary, UTF-8 that round-trips."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate from the client's JSON
        return NotText(f"{names.shown(path)} is not valid UTF-8; it cannot be edited as text")
    if size > EDIT_LIMIT:
        limit = human_size(EDIT_LIMIT)
        return NotText(f"{names.shown(path)} is too large to edit as text ({human_size(size)}; the limit is {limit})")
    if looks_binary(text[:SNIFF_BYTES].encode("utf-8")):
        return NotText(f"{names.shown(path)} is a binary file; it cannot be edited as text")
    return text


async def old_text(ctx: ToolContext, path: str, root: str) -> Old:
    """What the file holds now: the editor's buffer where it serves reads (unsaved text included), else the disk.

    Only called after the gate allowed the call, so a path that needs asking reaches the editor only once
    the user said yes; the preview shown before that is the disk's.
    """
    text = await client_read(ctx, path, root)
    if text is not None:
        return client_old(path, text)
    return await anyio.to_thread.run_sync(partial(disk_old, path, root), abandon_on_cancel=True)


def encoded(path: str, text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > EDIT_LIMIT:
        raise ToolFailed(
            f"{names.shown(path)} would be {human_size(len(data))} long; the limit is {human_size(EDIT_LIMIT)}"
        )
    return data
