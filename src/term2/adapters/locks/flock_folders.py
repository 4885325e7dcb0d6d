"""Folder locks: byte-range locks of open file descriptions in one file, for every term2 process of the user (ADR 0038).

Each folder identity (device, inode) owns three bytes of one lock file in a
private folder, each byte a lock: `run` (programs hold it shared while they
run), `edit` (editor requests hold it shared while they are in flight) and
`gate` (editors hold it exclusively for the instant of their check, so two
editors never mistake each other for a program). The protocol, per folder:

- program: take `run` shared, then `edit` exclusive (which waits until no
  editor request is in flight) and drop it at once; run; drop `run`.
- editor: take `edit` shared, then under `gate` try `run` exclusive without
  waiting: taken means no program holds it, so drop it and send the request;
  refused means a program runs, so drop everything and use the disk.

Why it holds whatever the timing: an editor that got `run` exclusive holds
`edit` shared from before that moment; a program that takes `run` afterwards
must then take `edit` exclusive, which the kernel grants only once that
editor dropped it. A program that held `run` first makes the editor's try
fail. Every lock is taken on a descriptor of its own (`F_OFD_SETLK`: owned by
the open file description, like `flock`), so tasks of one process exclude
each other exactly as processes do, and a crashed holder's locks go with it.

One file, not one per folder: the bytes are placed by a 60-bit hash of the
identity (locks may lie past the end of an empty file), so the folder holds
one empty file however many folders were ever used. Two identities that
share a hash share their locks: a program and an editor request that do not
conflict may then keep each other off (the disk serves the call), never the
reverse.

Every step is a non-blocking lock; a wait is a poll with a short sleep, so a
cancelled wait leaves no thread behind holding a lock.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import struct
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from term2.domain.editor_exclusion import FolderId
from term2.ports.folder_locks import FolderLockError
from term2.support.deferred_log import get_logger

log = get_logger("term2.locks")

POLL_S = 0.005
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
LOCK_FILE = "folders.lock"
_KINDS = {"run": 0, "edit": 1, "gate": 2}
# struct flock (flock64 where off_t is 32 bits): l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), in the
# platform's alignment; "0q" pads the end as the C struct is padded.
_FLOCK = struct.Struct("@hhqqi0q")
_SHARED, _EXCLUSIVE = fcntl.F_RDLCK, fcntl.F_WRLCK


class FlockFolderLocks:
    def __init__(self, folder: Path) -> None:
        self._path = folder
        self._complaint: str | None = None  # the last reason the folder was unusable, logged once
        self._setup = threading.Lock()

    def _folder(self) -> int:
        """The private lock folder, opened and checked afresh (it may have been removed); the caller closes it.

        OSError when it is unusable, each time: a program then does not run and an editor request is not sent,
        so no process relies on a lock that another process skipped.
        """
        with self._setup:
            try:
                return _private_folder(self._path)
            except OSError as err:
                if str(err) != self._complaint:
                    self._complaint = str(err)
                    log.warning(
                        "the lock folder is unusable: commands do not run, the editor is not used for files",
                        folder=str(self._path),
                        error=self._complaint,
                    )
                raise

    @asynccontextmanager
    async def program(self, root: FolderId) -> AsyncIterator[None]:
        try:
            folder = self._folder()
        except OSError as err:
            raise FolderLockError(f"the lock folder {self._path} is unusable: {err}") from None
        try:
            run = _open(folder, root, "run")
            try:
                edit = _open(folder, root, "edit")
            except OSError:
                os.close(run.fd)
                raise
        except OSError as err:
            raise FolderLockError(f"cannot open the folder lock: {err}") from None
        finally:
            os.close(folder)
        try:
            try:
                await _poll(run, _SHARED)
                await _poll(edit, _EXCLUSIVE)  # every editor request in flight on this folder has ended
            finally:
                os.close(edit.fd)
            yield
        finally:
            os.close(run.fd)

    @asynccontextmanager
    async def editor(self, way: Sequence[FolderId]) -> AsyncIterator[bool]:
        try:
            folder: int | None = self._folder()
        except OSError:
            folder = None
        if folder is None:
            yield False
            return
        held: list[_Lock] = []
        try:
            try:
                free = await _hold_for_editor(folder, sorted(set(way)), held)
            finally:
                os.close(folder)
            yield free
        finally:
            for lock in held:
                os.close(lock.fd)


class _Lock:
    """One lock of one folder: a descriptor of its own on the lock file, and the byte it locks."""

    __slots__ = ("fd", "offset")

    def __init__(self, fd: int, offset: int) -> None:
        self.fd = fd
        self.offset = offset


def _try(lock: _Lock, kind: int) -> None:
    """Take `lock` without waiting; BlockingIOError while a conflicting holder has it."""
    try:
        fcntl.fcntl(lock.fd, fcntl.F_OFD_SETLK, _FLOCK.pack(kind, os.SEEK_SET, lock.offset, 1, 0))
    except OSError as err:
        if err.errno in (errno.EAGAIN, errno.EACCES):
            raise BlockingIOError(err.errno, "held by another") from None
        raise


async def _poll(lock: _Lock, kind: int) -> None:
    while True:
        try:
            _try(lock, kind)
            return
        except BlockingIOError:
            await anyio.sleep(POLL_S)


async def _hold_for_editor(folder: int, keys: list[FolderId], held: list[_Lock]) -> bool:
    """Take every key's `edit` lock shared (into `held`); True when no `run` lock of them is held."""
    try:
        for key in keys:
            edit = _open(folder, key, "edit")
            held.append(edit)
            _try(edit, _SHARED)  # refused only while a program checks in
        for key in keys:
            if not await _no_program(folder, key):
                return False
    except BlockingIOError:
        return False
    except OSError as err:
        log.warning("a folder lock could not be taken; the disk serves the call", error=str(err))
        return False
    return True


async def _no_program(folder: int, key: FolderId) -> bool:
    """Whether no program holds `key`'s run lock, checked under its gate so two editors never collide."""
    gate = _open(folder, key, "gate")
    try:
        await _poll(gate, _EXCLUSIVE)  # held by editors only for this check: never long
        run = _open(folder, key, "run")
        try:
            _try(run, _EXCLUSIVE)
        except BlockingIOError:
            return False
        finally:
            os.close(run.fd)  # the exclusive lock, if taken, goes with it
        return True
    finally:
        os.close(gate.fd)


def _open(folder: int, key: FolderId, kind: str) -> _Lock:
    """A descriptor of its own on the lock file (each lock needs its own open file description) for `kind` of `key`."""
    fd = os.open(LOCK_FILE, _FILE, 0o600, dir_fd=folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{LOCK_FILE} is not a regular file")
    return _Lock(fd, _offset(key) + _KINDS[kind])


def _offset(key: FolderId) -> int:
    """Where `key`'s three bytes start: a 60-bit hash of the identity, times four (below 2**62, a valid offset)."""
    digest = hashlib.blake2b(f"{key.device}:{key.inode}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 4) * 4


def _private_folder(path: Path) -> int:
    """Open (making it 0700 if missing) the lock folder; refuse one that is not the user's own and private.

    Anyone else able to write it could hold a lock forever (commands would wait) or swap lock files; anyone
    able to change a folder above it could move it away while a program holds its lock there, so that the
    next lock is taken in a fresh folder that knows of no program (`_others_can_move`).
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, _FOLDER)
    info = os.fstat(fd)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        os.close(fd)
        raise PermissionError(
            f"{path} must be a folder owned by uid {os.getuid()} with mode 0700 (it is {oct(info.st_mode & 0o777)},"
            f" owned by uid {info.st_uid})"
        )
    try:
        above = _others_can_move(path)
    except OSError:
        os.close(fd)
        raise
    if above is not None:
        os.close(fd)
        raise PermissionError(f"another user can move {path} away: {above}")
    return fd


def _others_can_move(path: Path) -> str | None:
    """Why a user other than this one (or root) could rename `path`, or None: no folder above it lets them.

    Every folder above it, as written and as resolved, must be owned by this user or root, and writable by no
    one else unless sticky (then only the owner of an entry may move it, and that entry is checked next). A
    group-writable folder of the user's own primary group is the user's.
    """
    uid, gid = os.getuid(), os.getgid()
    folders = {*path.parents, *Path(os.path.realpath(path.parent)).parents, Path(os.path.realpath(path.parent))}
    for folder in sorted(folders):
        info = os.lstat(folder)
        if info.st_uid not in (0, uid):
            return f"{folder} is owned by uid {info.st_uid}"
        if stat.S_ISLNK(info.st_mode) or info.st_mode & stat.S_ISVTX:
            continue
        others = stat.S_IWOTH | (stat.S_IWGRP if info.st_gid != gid else 0)
        if info.st_mode & others:
            return f"{folder} is writable by others (mode {oct(info.st_mode & 0o7777)})"
    return None
