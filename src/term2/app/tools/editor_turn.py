"""An editor request's turn: held only while no sandboxed program can move its path (ADR 0038).

The editor opens the path string it is sent and follows symlinks; term2's
descriptors cannot go with it (ADR 0024). Checks of the path before and after
the request cannot close that gap: a program running beside the call can
swap a folder for a link and back between them. So a request is sent only
under the folder locks of every folder on its way (`/` down to the path's
parent, by identity), which no program writing any of them may hold at the
same time: programs started meanwhile wait for the request to end, and a
request made while such a program runs is not sent at all (the disk, safe
by descriptors, serves the call; ADR 0009).

The identities are read by descriptors from `/` (no symlink followed), read
again once the locks are held, and must match: the locked folders are the
folders the path goes through while nothing of term2's can change them.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from functools import partial

import anyio.to_thread

from term2.domain.editor_exclusion import FolderId, folders_on_the_way
from term2.ports.tools import ToolContext
from term2.support.deferred_log import get_logger

log = get_logger("term2.tools")

_FOLDER = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def way_of(path: str) -> tuple[FolderId, ...]:
    """The identities of the folders on `path`'s way, walked by descriptors from `/`.

    Stops at the first folder that is missing or is not a folder (a symlink included): no program can be
    rooted below it now, and whatever then acts on the path by descriptors refuses the symlink itself.
    """
    names = [os.path.basename(folder) for folder in folders_on_the_way(path)[1:]]
    fd = os.open("/", _FOLDER)
    try:
        info = os.fstat(fd)
        way = [FolderId(info.st_dev, info.st_ino)]
        for name in names:
            try:
                below = os.open(name, _FOLDER, dir_fd=fd)
            except OSError:  # missing, a symlink (ENOTDIR with O_NOFOLLOW), not searchable
                break
            os.close(fd)
            fd = below
            info = os.fstat(fd)
            way.append(FolderId(info.st_dev, info.st_ino))
        return tuple(way)
    finally:
        os.close(fd)


@asynccontextmanager
async def editor_turn(ctx: ToolContext, path: str) -> AsyncIterator[bool]:
    """True while the editor may be asked about the canonical `path`; False: the disk serves the call.

    False without folder locks (nothing could keep programs off), while a program runs on a folder on the
    way, when the locks cannot be taken, or when the way changed before they were held. Never waits for a
    program; the reason is logged. Inside an edit that holds the path's turn already (`one_source`), only
    folders of the way it does not hold (made since, for a write) are locked: a program on the held ones is
    waiting for the edit, not running.
    """
    async with _turn(ctx, path, ctx.editor_turns.get(path, ())) as way:
        yield way is not None


@asynccontextmanager
async def _turn(
    ctx: ToolContext, path: str, held: tuple[FolderId, ...] = ()
) -> AsyncIterator[tuple[FolderId, ...] | None]:
    """The way of `path`, kept from programs as editor_turn says, or None; `held`: its leading folders that
    this edit keeps from programs already, which count only while the way still begins with them."""
    locks = ctx.folder_locks
    if locks is None:
        yield None
        return
    way = await anyio.to_thread.run_sync(partial(way_of, path))
    rest = way[len(held) :] if way[: len(held)] == held else way
    if not rest:
        yield way
        return
    async with locks.editor(rest) as free:
        if not free:
            log.info("a sandboxed program may write a folder on the path; term2 uses the disk", path=path)
            yield None
            return
        if await anyio.to_thread.run_sync(partial(way_of, path)) != way:
            log.info("the path changed before the editor was asked; term2 uses the disk", path=path)
            yield None
            return
        yield way


@asynccontextmanager
async def one_source(ctx: ToolContext, *paths: str) -> AsyncIterator[ToolContext]:
    """A context in which an edit's reads of `paths` and its writes come from the same side.

    Held across both: a program that starts meanwhile waits for the edit to end, so an edit whose old text
    is the editor's buffer is written through the editor (its requests inside reuse these turns: each of
    them, taking a turn of its own, would be turned away by the program waiting for this one, and a patch
    would fail half made, its first files in the buffer). One that found a program running (on any of the
    paths) keeps to the disk for its writes too, even if the program ended in between (else the disk's
    text, written into the buffer, would drop the user's unsaved edits).
    """
    if ctx.client_files is None:
        yield ctx
        return
    async with AsyncExitStack() as turns:
        held: dict[str, tuple[FolderId, ...]] = {}
        for path in paths:
            way = await turns.enter_async_context(_turn(ctx, path))
            if way is None:
                yield replace(ctx, client_files=None)
                return
            held[path] = way
        yield replace(ctx, editor_turns={**ctx.editor_turns, **held})
