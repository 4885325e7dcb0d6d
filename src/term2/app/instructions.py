"""A session's project instructions: found on disk, read safely, re-read only when they change.

The files live from the git root (the nearest folder at or above the session's
cwd holding a `.git` entry; the cwd itself when there is none) down to the cwd
(rules in `domain/instructions.py`). They are read through the same
descriptor helpers as the file tools: each folder is opened from the git root
one component at a time without following links, and a file is read only
when it is a regular file, opened O_NOFOLLOW|O_NONBLOCK. So a symlink named
AGENTS.md never leads out of the project and a FIFO never hangs a turn; both
are skipped. Every turn looks at the files again (a few lstat calls) and reads
them only when one's identity, size or mtime moved, so an edit between two
prompts reaches the very next request.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import structlog

from term2.app.tools.anchored import FILE_READ, open_folder, open_in, read_upto
from term2.app.tools.failure import ToolFailed
from term2.domain.instructions import (
    CANDIDATES,
    FILE_LIMIT,
    InstructionFile,
    chosen_name,
    folders_down,
    render_instructions,
)

log = structlog.get_logger("term2.instructions")


def git_root(cwd: str) -> str:
    """The nearest folder at or above the canonical `cwd` that holds a `.git` entry, else `cwd`."""
    folder = cwd
    while True:
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return cwd
        folder = parent


@dataclass(frozen=True, slots=True)
class _Entry:
    folder: str
    name: str
    path: str  # relative to the git root
    info: os.stat_result

    def key(self) -> tuple[str, int, int, int, int, int]:
        i = self.info
        return (self.path, i.st_mode, i.st_dev, i.st_ino, i.st_size, i.st_mtime_ns)


def _entries(top: str, cwd: str) -> Iterator[_Entry]:
    """Each folder's chosen instruction file, as lstat sees it, root first."""
    for folder in folders_down(top, cwd):
        try:
            fd = open_folder(folder, top)
        except (OSError, ToolFailed) as exc:
            log.warning("instructions folder skipped", folder=folder, error=str(exc))
            continue
        try:
            present: dict[str, os.stat_result] = {}
            for name in CANDIDATES:
                try:
                    present[name] = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    pass
        finally:
            os.close(fd)
        chosen = chosen_name(present)
        if chosen is not None:
            path = os.path.relpath(os.path.join(folder, chosen), top)
            yield _Entry(folder, chosen, path, present[chosen])


def _read(top: str, entry: _Entry) -> InstructionFile | None:
    """The file's first FILE_LIMIT + 1 bytes, or None when it is not a regular file (or is gone)."""
    try:
        folder_fd = open_folder(entry.folder, top)
        try:
            fd = open_in(folder_fd, entry.name, entry.path, flags=FILE_READ)
        finally:
            os.close(folder_fd)
        try:
            data = read_upto(fd, FILE_LIMIT + 1)
        finally:
            os.close(fd)
    except (OSError, ToolFailed) as exc:
        log.warning("instructions file skipped", path=entry.path, error=str(exc))
        return None
    return InstructionFile(entry.path, data)


class ProjectInstructions:
    """One session's instruction section, cached until a file's lstat changes."""

    def __init__(self, cwd: str) -> None:
        self._cwd = cwd
        self._key: object = None
        self._text = ""

    def current(self) -> str:
        """The section as the files stand now (blocking: a few lstat calls, reads only on change)."""
        top = git_root(self._cwd)
        entries = list(_entries(top, self._cwd))
        key = (top, tuple(entry.key() for entry in entries))
        if key != self._key:
            files = [file for file in (_read(top, entry) for entry in entries) if file is not None]
            self._text = render_instructions(files)
            self._key = key
            log.debug("instructions read", root=top, files=[f.path for f in files])
        return self._text

    async def read(self) -> str:
        """`current()` off the event loop: a slow disk must not stall other sessions."""
        return await anyio.to_thread.run_sync(self.current)
