"""Linux inotify through libc, and the file system types whose events can be trusted (ADR 0031).

The sandbox keeps a watch on every folder of a workspace it has walked, so that
the walks before and after each command re-list only the folders the kernel
says changed. The kernel queues an event inside the system call that made the
change, before that call returns, whichever mount namespace (a sandbox's bind
mount included) the change came through; so once a command's processes are
gone, every change they made is in the queue. Events cannot be forged or
withheld by a command: it does not hold this descriptor, and a timestamp it
sets back (``utimensat``) is not what the events are about.

Only file systems whose every change goes through this kernel's VFS can be
trusted that way: network and FUSE file systems change behind it, so folders
on those are walked in full every time.
"""

from __future__ import annotations

import errno
import os
import struct
from typing import Any

from term2.adapters.sandbox.folder_watch import Change, EventsLost, OutOfWatches, Unwatchable

IN_ATTRIB = 0x00000004
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_EXCL_UNLINK = 0x04000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC

# Names and folders coming and going, and mode changes (a folder made unlistable, a setid bit):
# no content events, which a busy command would raise by the million and nothing here needs.
FOLDER_EVENTS = (
    IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
    | IN_ONLYDIR | IN_EXCL_UNLINK
)  # fmt: skip

# statfs f_type of local file systems: every change to them passes through this kernel's VFS.
LOCAL_FILE_SYSTEMS = frozenset(
    {
        0xEF53,  # ext2/3/4
        0x58465342,  # xfs
        0x9123683E,  # btrfs
        0x01021994,  # tmpfs
        0xF2F52010,  # f2fs
        0x2FC12FC1,  # zfs
        0xCA451A4E,  # bcachefs
        0x794C7630,  # overlayfs (the upper layer; the lower ones are read-only by contract)
        0x858458F6,  # ramfs
    }
)

_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
_READ_SIZE = 1 << 16


def _libc() -> Any:
    import ctypes  # here, not at import: the sandbox adapter stays cheap to import

    libc = ctypes.CDLL(None, use_errno=True)
    return libc, ctypes


class Inotify:
    """One inotify instance: a non-blocking descriptor, watches added through open folder descriptors.

    A ``Watcher`` (``folder_watch``) whose keys are watch descriptors: the same inode watched twice
    (a folder bind-mounted at two places of the tree) has one.
    """

    kind = "inotify"

    def __init__(self) -> None:
        try:
            self._libc, self._ctypes = _libc()
            fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError) as exc:
            raise Unwatchable(f"no inotify: {exc}") from None
        if fd < 0:
            raise Unwatchable(f"no inotify instance: {os.strerror(self._ctypes.get_errno())}")
        self.fd: int | None = fd

    def watch(self, folder_fd: int, st: os.stat_result | None = None) -> int:
        """Watch the folder behind ``folder_fd``: through its /proc magic link, so the very inode that
        was opened (with O_NOFOLLOW, relative to its parent) is watched, never what a path names now."""
        wd = self._libc.inotify_add_watch(self.fd, f"/proc/self/fd/{folder_fd}".encode(), FOLDER_EVENTS)
        if wd < 0:
            err = self._ctypes.get_errno()
            why = f"inotify watch refused: {os.strerror(err)}"
            # ENOSPC: fs.inotify.max_user_watches reached (a watch already on this inode is given back even then)
            raise OutOfWatches(why) if err == errno.ENOSPC else Unwatchable(why)
        return int(wd)

    def unwatch(self, key: object) -> None:
        self._libc.inotify_rm_watch(self.fd, key)  # already gone with its inode: nothing to do

    def read(self) -> list[Change]:
        """Every change queued so far; never blocks. A queue overflow or a file system unmounted under a
        watch loses events: EventsLost."""
        changes: list[Change] = []
        assert self.fd is not None
        while True:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                return changes
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size + length
                if mask & (IN_Q_OVERFLOW | IN_UNMOUNT):
                    raise EventsLost("inotify queue overflow" if mask & IN_Q_OVERFLOW else "a file system unmounted")
                itself = bool(mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
                changes.append(Change(wd, itself=itself, lost=bool(mask & IN_IGNORED)))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def file_system_type(fd: int) -> int | None:
    """``statfs``'s f_type for the open folder ``fd`` (the first field of struct statfs on Linux), or
    None when it cannot be asked."""
    try:
        libc, ctypes = _libc()
        buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
        if libc.fstatfs(fd, buf) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return int(struct.unpack_from("l", buf.raw)[0]) & 0xFFFFFFFF


def trusted_file_system(fd: int) -> bool:
    return file_system_type(fd) in LOCAL_FILE_SYSTEMS
