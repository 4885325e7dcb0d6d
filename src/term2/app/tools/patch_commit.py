"""Making a planned patch, file by file, and undoing what was made when a later file fails (ADR 0027).

Each file is made on one side, the editor's buffer or the disk (ADR 0038's `one_source`), and its
undo goes to the side that made it: a change the editor made is put back through the editor (the disk
never held it, so writing the disk would undo nothing and overwrite what the user saved there), and a
file the editor created cannot be removed through ACP, so that undo is reported as failed rather than
claimed. The caller runs this shielded from a cancel: from the first write on, the patch is made or
undone, never left half made.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import anyio
import anyio.to_thread

from term2.app.tools import names
from term2.app.tools.anchored import remove_whole, write_whole
from term2.app.tools.edit_texts import Old, encoded
from term2.app.tools.failure import ToolFailed
from term2.app.tools.through_client import client_write, reader
from term2.domain.history import ToolOutput
from term2.ports.tools import ToolContext


@dataclass(frozen=True, slots=True)
class PlannedChange:
    """One file's part of a planned patch: what it held (on the disk), and what it will hold."""

    path: str
    new: str | None  # None: removed
    text: str  # the model's report
    content: ToolOutput  # the client's
    line: int | None = None
    mode: int = 0o644  # a moved file keeps its mode


async def commit(
    ctx: ToolContext, root: str, changes: list[PlannedChange], priors: list[bytes | None], olds: dict[str, Old]
) -> None:
    """Make every change in order; when one fails, undo those made before it (newest first) and say so.

    `priors` are the disk's bytes of each file before (None: no file), `olds` the text each change was
    worked out from (the editor's buffer where the editor serves the file).
    """
    made: list[tuple[int, bool]] = []  # each change made, and whether the editor made it
    for index, change in enumerate(changes):
        try:
            by_editor = await _make(ctx, root, change)
        except Exception as err:
            undone = await _undo(ctx, root, changes, priors, olds, made)
            after = "the changes made before it were undone" if undone else "undoing those before it failed: check them"
            raise ToolFailed(f"writing {names.shown(change.path)} failed ({err}); {after}") from None
        made.append((index, by_editor))


async def _make(ctx: ToolContext, root: str, change: PlannedChange) -> bool:
    """Make one change; True when the editor made it (in its buffer), False when term2 wrote the disk."""
    if change.new is None:
        await anyio.to_thread.run_sync(partial(remove_whole, change.path, root))
        return False
    if await client_write(ctx, change.path, root, change.new, buffer_based=reader(ctx, change.path) is not None):
        return True
    data = encoded(change.path, change.new)
    await anyio.to_thread.run_sync(partial(write_whole, change.path, root, data, mode=change.mode))
    return False


async def _undo(
    ctx: ToolContext,
    root: str,
    changes: list[PlannedChange],
    priors: list[bytes | None],
    olds: dict[str, Old],
    made: list[tuple[int, bool]],
) -> bool:
    whole = True
    for index, by_editor in reversed(made):
        change, prior = changes[index], priors[index]
        try:
            if by_editor:
                old = olds.get(change.path)
                if not isinstance(old, str) or not await client_write(ctx, change.path, root, old, buffer_based=True):
                    whole = False
            elif prior is None:
                await anyio.to_thread.run_sync(partial(remove_whole, change.path, root))
            else:
                await anyio.to_thread.run_sync(partial(write_whole, change.path, root, prior, mode=change.mode))
        except (OSError, ToolFailed):
            whole = False
    return whole
