"""Linux fanotify through libc: one mark per file system instead of a watch per folder (ADR 0033).

inotify needs a watch per folder, and ``fs.inotify.max_user_watches`` (192,536
on a 23 GB machine) is less than the folders of an npm-shaped tree of 1.5M
entries. With CAP_SYS_ADMIN, fanotify marks a whole file system at once
(``FAN_MARK_FILESYSTEM``) and reports each change with the file handle of the
folder it happened in (``FAN_REPORT_DFID_NAME``), or of the folder itself for
its own deletion, move or mode change (the name then is "."). The kept walk
records each folder's handle (``name_to_handle_at`` on its open descriptor)
before listing it, and a change is the folder whose handle it carries.

A mark sees the whole file system, so every process's changes are queued, most
of them outside the workspace. A reader thread (one per sandbox: the group is
shared by the roots it keeps) drains the queue as they come and keeps, for
each tree, only those naming one of its folders (a set, so a folder changed a
thousand times is one entry); the kernel's queue stays short and bounded (its
default 16,384 events), and its overflow, an event not understood, or more
changed folders than a walk is worth is ``EventsLost``: a full walk. A scan
first drains what is queued by then, under the same lock, so every change made
before the scan began is in what it reads.

Without CAP_SYS_ADMIN a filesystem mark is refused, but since Linux 5.13 a group
reporting file handles may add inode marks (``FAN_MARK_INODE``) on folders its
process can read, counted against ``fs.fanotify.max_user_marks``, a budget of
its own. A group made with ``inode_marks=True`` marks each folder it is given a
key for, through that folder's descriptor: what the kept walk spills to once
inotify's watches run out (``watch_spill``). Its events, keys and reader thread
are the filesystem group's.
"""

from __future__ import annotations

import errno
import os
import select
import struct
import threading
import time
from collections.abc import Container, Hashable
from typing import Any

from term2.adapters.sandbox.folder_watch import Change, EventsLost, MountTable, OutOfWatches, Unwatchable

FAN_CLOEXEC = 0x00000001
FAN_NONBLOCK = 0x00000002
FAN_CLASS_NOTIF = 0x00000000
FAN_REPORT_DFID_NAME = 0x00000C00  # FAN_REPORT_DIR_FID | FAN_REPORT_NAME (Linux 5.9)
FAN_MARK_ADD = 0x00000001
FAN_MARK_INODE = 0x00000000
FAN_MARK_FILESYSTEM = 0x00000100
FAN_ATTRIB = 0x00000004
FAN_MOVED_FROM = 0x00000040
FAN_MOVED_TO = 0x00000080
FAN_CREATE = 0x00000100
FAN_DELETE = 0x00000200
FAN_DELETE_SELF = 0x00000400
FAN_MOVE_SELF = 0x00000800
FAN_Q_OVERFLOW = 0x00004000
FAN_EVENT_ON_CHILD = 0x08000000
FAN_ONDIR = 0x40000000
METADATA_VERSION = 3
AT_EMPTY_PATH = 0x1000
AT_HANDLE_FID = 0x200  # Linux 6.5: the handle fanotify reports, also where it could not be opened again
MAX_HANDLE_SZ = 128
FILEID_INVALID = 0xFF  # the handle type of an event whose handle the kernel could not encode
# The same events as the inotify watches ask for (names, folders, modes), on folders too; no content.
FOLDER_EVENTS = (
    FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_ATTRIB | FAN_DELETE_SELF | FAN_MOVE_SELF
    | FAN_ONDIR | FAN_EVENT_ON_CHILD
)  # fmt: skip
_SELF = FAN_DELETE_SELF | FAN_MOVE_SELF
_INFO_WITH_HANDLE = frozenset({1, 2, 3, 10, 12})  # FID, DFID_NAME, DFID, OLD_DFID_NAME, NEW_DFID_NAME
_METADATA = struct.Struct("=IBBHQii")  # event_len, vers, reserved, metadata_len, mask, fd, pid
_INFO = struct.Struct("=BBH8sIi")  # info_type, pad, len, fsid, handle_bytes, handle_type
_READ_SIZE = 1 << 16
# The reader sleeps this long after a wake-up before draining: 16,384 events then overflow only at
# more than ~1.6M events a second, and a busy file system costs far fewer wake-ups.
BATCH_S = 0.01
# Distinct changed folders kept between two scans: past this, one walk is cheaper anyway (REWALK_FOLDERS).
PENDING_MAX = 8192


def _libc() -> tuple[Any, Any]:
    import ctypes  # here, not at import: the sandbox adapter stays cheap to import

    libc = ctypes.CDLL(None, use_errno=True)
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
    return libc, ctypes


class FanotifyGroup:
    """One fanotify group: its descriptor, a mark per file system met, and the reader thread, shared by
    the trees of one sandbox (``TreeWatches``) so that each event on a marked file system is parsed once
    however many roots are kept. Each tree subscribes with a ``Fanotify`` watcher.

    ``inode_marks``: a mark per folder instead of one per file system (what an unprivileged process may
    add); the group then belongs to one tree, so closing it lets go of every mark it added."""

    def __init__(self, *, inode_marks: bool = False) -> None:
        self.inode_marks = inode_marks
        try:
            self._libc, self._ctypes = _libc()
            fd = self._libc.fanotify_init(
                FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME, os.O_RDONLY | os.O_CLOEXEC
            )
        except (OSError, AttributeError) as exc:
            raise Unwatchable(f"no fanotify: {exc}") from None
        if fd < 0:
            raise Unwatchable(f"no fanotify group: {os.strerror(self._ctypes.get_errno())}")
        self.fd: int | None = fd
        self._fsids: dict[int, bytes] = {}  # st_dev -> f_fsid of the file systems marked
        # st_dev numbers are reused: a tmpfs unmounted and another mounted gets the same one, unmarked.
        # The cache is dropped whenever term2's mount table changed (``revalidate``, at each walk's start).
        try:
            self._mounts = MountTable()
        except OSError as exc:
            os.close(fd)
            raise Unwatchable(f"no mount table to poll: {exc}") from None
        self._handle_flags = AT_EMPTY_PATH | AT_HANDLE_FID
        self.lock = threading.Lock()  # one reader at a time; the subscribers and their pending sets with it
        self._subscribers: list[Fanotify] = []
        # Why no file system could be marked, when it holds for all (no CAP_SYS_ADMIN: EPERM). The group is
        # made before any mark is tried (fanotify_init succeeds unprivileged), so the owner asks this to
        # stop making groups that cannot serve.
        self.refused: str | None = None
        # The reader thread and its wake-up pipe come with the first mark: a group refused one has none.
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1

    # -- marks and keys -------------------------------------------------------

    def key(self, folder_fd: int, st: os.stat_result) -> bytes:
        """The key of the folder open as ``folder_fd``; its file system is marked the first time it is met
        (inode marks: the folder itself, every time: a second mark of one inode is the same mark). The mark
        is added through the descriptor itself, never a path."""
        if self.inode_marks:
            self._mark_inode(folder_fd)
            return self.name(folder_fd, st)
        fsid = self._fsids.get(st.st_dev)
        if fsid is None:
            with self.lock:
                fsid = self._mark(folder_fd, st)
        return fsid + self._handle(folder_fd)

    def name(self, folder_fd: int, st: os.stat_result) -> bytes:
        """The key fanotify's events would give the folder open as ``folder_fd``, marking nothing."""
        fsid = self._fsids.get(st.st_dev)
        if fsid is None:
            fsid = _fsid(folder_fd)
            if fsid is None or fsid == bytes(8):
                raise Unwatchable("fanotify cannot tell this file system apart (no fsid)")
            self._fsids[st.st_dev] = fsid
        return fsid + self._handle(folder_fd)

    def _mark_inode(self, folder_fd: int) -> None:
        if self._libc.fanotify_mark(self.fd, FAN_MARK_ADD | FAN_MARK_INODE, FOLDER_EVENTS, folder_fd, None):
            err = self._ctypes.get_errno()
            why = f"fanotify inode mark refused: {os.strerror(err)}"
            raise OutOfWatches(why) if err == errno.ENOSPC else Unwatchable(why)  # max_user_marks reached
        if self._thread is None:
            with self.lock:
                self._start_reader()

    def revalidate(self) -> None:
        """Forget which file systems were marked when the mount table changed since last asked: the next
        folder met on each is marked again (a second mark of one file system is harmless)."""
        with self.lock:
            if self._mounts.changed():
                self._fsids.clear()

    def _mark(self, folder_fd: int, st: os.stat_result) -> bytes:
        fsid = self._fsids.get(st.st_dev)
        if fsid is not None:
            return fsid
        fsid = _fsid(folder_fd)
        if fsid is None or fsid == bytes(8):
            raise Unwatchable("fanotify cannot tell this file system apart (no fsid)")
        if self._libc.fanotify_mark(self.fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FOLDER_EVENTS, folder_fd, None):
            err = self._ctypes.get_errno()
            why = f"fanotify mark refused: {os.strerror(err)}"
            if err == errno.EPERM and not self._fsids:
                self.refused = why
            raise Unwatchable(why)
        self._fsids[st.st_dev] = fsid
        self._start_reader()
        return fsid

    def _start_reader(self) -> None:
        """The reader thread, with the first mark (the caller holds the lock): a group with none needs none."""
        if self._thread is None and self.fd is not None:
            self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            self._thread = threading.Thread(target=self._drain_forever, name="term2-fanotify", daemon=True)
            self._thread.start()

    def _handle(self, folder_fd: int) -> bytes:
        ctypes = self._ctypes
        buf = ctypes.create_string_buffer(8 + MAX_HANDLE_SZ)
        struct.pack_into("=Ii", buf, 0, MAX_HANDLE_SZ, 0)
        mount_id = ctypes.c_int()
        while True:
            flags = self._handle_flags
            if self._libc.name_to_handle_at(folder_fd, b"", buf, ctypes.byref(mount_id), flags) == 0:
                size, kind = struct.unpack_from("=Ii", buf.raw)
                raw: bytes = buf.raw
                return struct.pack("=i", kind) + raw[8 : 8 + size]
            err = ctypes.get_errno()
            if err == 22 and flags & AT_HANDLE_FID:  # EINVAL: a kernel before 6.5
                self._handle_flags = flags & ~AT_HANDLE_FID
                continue
            raise Unwatchable(f"no file handle for a folder: {os.strerror(err)}")

    # -- subscribers ------------------------------------------------------------

    def subscribe(self, watcher: Fanotify) -> None:
        with self.lock:
            self._subscribers.append(watcher)

    def unsubscribe(self, watcher: Fanotify) -> None:
        with self.lock:
            if watcher in self._subscribers:
                self._subscribers.remove(watcher)

    # -- events -----------------------------------------------------------------

    def _drain_forever(self) -> None:
        wake_r = self._wake_r
        poll = select.poll()
        poll.register(self.fd, select.POLLIN)  # type: ignore[arg-type]
        poll.register(wake_r, select.POLLIN)
        while True:
            ready = poll.poll()
            if any(fd == wake_r for fd, _mask in ready):
                return
            time.sleep(BATCH_S)  # let events gather: one wake-up (and GIL switch) for many, not one each
            with self.lock:
                if self.fd is None:
                    return
                self.drain()

    def drain(self) -> None:
        """Read every queued event (the caller holds the lock) and give each subscriber those naming one
        of its folders."""
        assert self.fd is not None
        while True:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                return
            except OSError as exc:
                self._lose(f"fanotify read failed: {exc}")
                return
            lost = self._take(data)
            if lost is not None:
                self._lose(lost)
            for watcher in self._subscribers:
                if watcher.lost is None and len(watcher.pending) > PENDING_MAX:
                    watcher.lost = f"more than {PENDING_MAX:,} folders changed"
                if watcher.lost is not None:
                    watcher.pending.clear()  # that tree is walked again: keep nothing for it

    def _lose(self, why: str) -> None:
        for watcher in self._subscribers:
            if watcher.lost is None:
                watcher.lost = why

    def _take(self, data: bytes) -> str | None:
        offset = 0
        subscribers = [w for w in self._subscribers if w.lost is None]
        while offset < len(data):
            event_len, version, _reserved, metadata_len, mask, fd, _pid = _METADATA.unpack_from(data, offset)
            if version != METADATA_VERSION or event_len < metadata_len:
                return f"fanotify event version {version} not understood"
            if fd >= 0:
                os.close(fd)  # never asked for: a group reporting handles opens none
            if mask & FAN_Q_OVERFLOW:
                return "fanotify queue overflow"
            info, end = offset + metadata_len, offset + event_len
            named = False
            while info < end:
                info_type, _pad, info_len, fsid, handle_bytes, handle_type = _INFO.unpack_from(data, info)
                if info_len == 0:
                    return "an empty fanotify info record"
                if info_type in _INFO_WITH_HANDLE and handle_bytes and handle_type != FILEID_INVALID:
                    named = True
                    start = info + _INFO.size
                    key = fsid + struct.pack("=i", handle_type) + data[start : start + handle_bytes]
                    for watcher in subscribers:
                        if key in watcher.interest:
                            name = data[start + handle_bytes : info + info_len].split(b"\0", 1)[0]
                            watcher.pending.add(Change(key, itself=bool(mask & _SELF) and name in (b".", b"")))
                info += info_len
            if not named:
                # The kernel queues the event even when it could not encode the folder's handle (an allocation
                # failed: "fanotify: failed to encode fid"); the change is real, only whose it is is unknown.
                return "a fanotify event without a folder's handle"
            offset += event_len
        return None

    def close(self) -> None:
        if self.fd is None:
            return
        thread = self._thread
        if thread is not None:
            os.write(self._wake_w, b"x")
            if thread is not threading.current_thread():
                thread.join()
        with self.lock:
            os.close(self.fd)
            self.fd = None
            for watcher in self._subscribers:
                watcher.lost = "the fanotify group was closed"
        self._mounts.close()
        if thread is not None:
            os.close(self._wake_r)
            os.close(self._wake_w)


class Fanotify:
    """One tree's ``Watcher`` on a fanotify group (its own, or one shared by the sandbox's trees); keys are
    (file system id, handle type, handle). ``interest`` holds the keys of the tree's folders: the reader
    keeps only changes to those for it."""

    kind = "fanotify"

    def __init__(self, interest: Container[Hashable], group: FanotifyGroup | None = None) -> None:
        self._own = group is None
        self.group = FanotifyGroup() if group is None else group
        self.interest = interest
        self.pending: set[Change] = set()
        self.lost: str | None = None
        self.group.subscribe(self)

    def watch(self, folder_fd: int, st: os.stat_result) -> Hashable:
        return self.group.key(folder_fd, st)

    def unwatch(self, key: Hashable) -> None:
        """Nothing to let go of in the kernel: the mark is the file system's."""

    def read(self) -> list[Change]:
        """The changes to the tree's folders queued up to now (drained here, not left to the thread)."""
        group = self.group
        with group.lock:
            if group.fd is not None:
                group.drain()
            changes, self.pending = list(self.pending), set()
            lost, self.lost = self.lost, None
        if lost is not None:
            raise EventsLost(lost)
        return changes

    def close(self) -> None:
        self.group.unsubscribe(self)
        if self._own:
            self.group.close()


def _fsid(fd: int) -> bytes | None:
    """``statfs``'s f_fsid for the open folder ``fd``, as fanotify reports it (8 bytes at offset 56 of
    struct statfs on 64-bit Linux)."""
    try:
        libc, ctypes = _libc()
        buf = ctypes.create_string_buffer(256)
        if libc.fstatfs(fd, buf) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return bytes(buf.raw[56:64])
