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

Only the user's own entries count (ADR 0020): a `.git` marker, or an
instruction file, that another user owns (root excepted), or whose folder
another user owns or every user may write to, is ignored, and said so in
`ignored` (which `term2 prompt` prints) and in the log. An ignored marker
ends the search for the repository top, as if there were none: the session's
folder alone speaks. Ownership is judged on the very objects read: the file's
descriptor must be the entry that was judged.
"""

from __future__ import annotations

import functools
import os
import pwd
import stat
from dataclasses import dataclass

import anyio

from term2.app.tools.anchored import FILE_READ, open_folder, open_in, read_upto
from term2.app.tools.failure import ToolFailed
from term2.domain.instructions import (
    CANDIDATES,
    FILE_LIMIT,
    InstructionFile,
    chosen_name,
    folders_down,
    render_instructions,
    untrusted_reason,
)
from term2.support.deferred_log import get_logger

log = get_logger("term2.instructions")


@dataclass(frozen=True, slots=True)
class Ignored:
    """An entry left out because it may not be the user's: what it is, where, and why."""

    what: str  # "repository marker" or "instruction file"
    path: str  # absolute
    reason: str

    def __str__(self) -> str:
        return f"{self.path} ({self.what}): {self.reason}"


def _distrust(info: os.stat_result, folder: os.stat_result, me: int) -> str | None:
    return untrusted_reason(
        owner=info.st_uid,
        folder_owner=folder.st_uid,
        folder_mode=folder.st_mode,
        me=me,
        mode=info.st_mode,
        links=info.st_nlink if stat.S_ISREG(info.st_mode) else 1,
        group=info.st_gid,
        folder_group=folder.st_gid,
        my_group=_own_group(me),
    )


@functools.cache
def _own_group(uid: int) -> int | None:
    """The user's primary group: the one group whose write access still means the user's own
    (a user-private group, umask 002); None when the user is unknown, and then no group is theirs."""
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return None


def repository_top(cwd: str, me: int) -> tuple[str, Ignored | None]:
    """The nearest folder at or above the canonical `cwd` with a `.git` entry of the user's, else `cwd`.

    The search stops at the first `.git` entry met: one that is not the user's
    (see `untrusted_reason`) is returned as ignored, and `cwd` is the top.
    """
    folder = cwd
    while True:
        marker = os.path.join(folder, ".git")
        try:
            info = os.lstat(marker)
        except OSError:
            info = None
        if info is not None:
            try:
                reason = _distrust(info, os.lstat(folder), me)
            except OSError as exc:
                reason = f"its folder could not be checked: {exc}"
            if reason is None:
                return folder, None
            return cwd, Ignored("repository marker", marker, reason)
        parent = os.path.dirname(folder)
        if parent == folder:
            return cwd, None
        folder = parent


def git_root(cwd: str) -> str:
    """The repository top for this process's user (see `repository_top`)."""
    return repository_top(cwd, os.geteuid())[0]


@dataclass(frozen=True, slots=True)
class _Entry:
    folder: str
    name: str
    path: str  # relative to the git root
    info: os.stat_result

    def key(self) -> tuple[str, int, int, int, int, int]:
        i = self.info
        return (self.path, i.st_mode, i.st_dev, i.st_ino, i.st_size, i.st_mtime_ns)


def _entries(top: str, cwd: str, me: int) -> tuple[list[_Entry], list[Ignored]]:
    """Each folder's chosen instruction file, as lstat sees it, root first; and those not the user's."""
    entries: list[_Entry] = []
    ignored: list[Ignored] = []
    for folder in folders_down(top, cwd):
        try:
            fd = open_folder(folder, top)
        except (OSError, ToolFailed) as exc:
            log.warning("instructions folder skipped", folder=folder, error=str(exc))
            continue
        try:
            folder_info = os.fstat(fd)
            present: dict[str, os.stat_result] = {}
            for name in CANDIDATES:
                try:
                    present[name] = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    pass
        finally:
            os.close(fd)
        chosen = chosen_name(present)
        if chosen is None:
            continue
        reason = _distrust(present[chosen], folder_info, me)
        if reason is not None:
            ignored.append(Ignored("instruction file", os.path.join(folder, chosen), reason))
            continue
        path = os.path.relpath(os.path.join(folder, chosen), top)
        entries.append(_Entry(folder, chosen, path, present[chosen]))
    return entries, ignored


def _identity(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_dev, info.st_ino, info.st_uid)


def _read(top: str, entry: _Entry) -> InstructionFile | None:
    """The file's first FILE_LIMIT + 1 bytes, or None when it is not the regular file judged (or is gone)."""
    try:
        folder_fd = open_folder(entry.folder, top)
        try:
            fd = open_in(folder_fd, entry.name, entry.path, flags=FILE_READ)
        finally:
            os.close(folder_fd)
        try:
            if _identity(os.fstat(fd)) != _identity(entry.info):
                raise ToolFailed(f"{entry.path} was replaced after its owner was checked")
            data = read_upto(fd, FILE_LIMIT + 1)
        finally:
            os.close(fd)
    except (OSError, ToolFailed) as exc:
        log.warning("instructions file skipped", path=entry.path, error=str(exc))
        return None
    return InstructionFile(entry.path, data)


class ProjectInstructions:
    """One session's instruction section, cached until a file's lstat changes.

    `uid` is whose entries are trusted (besides root's): this process's
    effective uid unless a test says otherwise.
    """

    def __init__(self, cwd: str, *, uid: int | None = None, extra_roots: tuple[str, ...] = ()) -> None:
        self._roots = (cwd, *extra_roots)
        self._uid = os.geteuid() if uid is None else uid
        self._key: object = None
        self._text = ""
        self._ignored: tuple[Ignored, ...] = ()

    def with_roots(self, extra_roots: tuple[str, ...]) -> None:
        """The session's additional directories changed (a load or resume): read from the new set next time."""
        self._roots = (self._roots[0], *extra_roots)

    @property
    def ignored(self) -> tuple[Ignored, ...]:
        """What the last `current()` left out because it may not be the user's."""
        return self._ignored

    def current(self) -> str:
        """The section as the files stand now (blocking: a few lstat calls, reads only on change).

        Each root speaks from its own repository, by the same trust rules; an additional root's files are
        named by their absolute path (two roots may each hold an `AGENTS.md`), a file two roots share once.
        """
        found: list[tuple[str, _Entry, str]] = []  # (git top, entry, the name the model reads)
        ignored: list[Ignored] = []
        seen: set[str] = set()
        for index, root in enumerate(self._roots):
            top, marker = repository_top(root, self._uid)
            entries, left_out = _entries(top, root, self._uid)
            if marker is not None:
                left_out.insert(0, marker)
            ignored += [each for each in left_out if each not in ignored]
            for entry in entries:
                absolute = os.path.join(top, entry.path)
                if absolute not in seen:
                    seen.add(absolute)
                    found.append((top, entry, entry.path if index == 0 else absolute))
        key = (self._roots, tuple((top, entry.key()) for top, entry, _ in found), tuple(ignored))
        if key != self._key:
            read = ((_read(top, entry), name) for top, entry, name in found)
            files = [InstructionFile(name, file.data) for file, name in read if file is not None]
            self._text = render_instructions(files)
            self._ignored = tuple(ignored)
            self._key = key
            for each in ignored:
                log.warning("instructions ignored", what=each.what, path=each.path, reason=each.reason)
            log.debug("instructions read", roots=self._roots, files=[f.path for f in files])
        return self._text

    async def read(self) -> str:
        """`current()` off the event loop: a slow disk must not stall other sessions."""
        return await anyio.to_thread.run_sync(self.current)
