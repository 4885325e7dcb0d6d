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
of them outside the workspace. A reader thread drains the queue as they come
and keeps only those naming a folder of the tree (a set, so a folder changed a
thousand times is one entry); the kernel's queue stays short and bounded (its
default 16,384 events), and its overflow, an event not understood, or more
changed folders than a walk is worth is ``EventsLost``: a full walk. A scan
first drains what is queued by then, under the same lock, so every change made
before the scan began is in what it reads.
"""

from __future__ import annotations

import os
import select
import struct
import threading
import time
from collections.abc import Container, Hashable
from typing import Any

from term2.adapters.sandbox.folder_watch import Change, EventsLost, Unwatchable

FAN_CLOEXEC = 0x00000001
FAN_NONBLOCK = 0x00000002
FAN_CLASS_NOTIF = 0x00000000
FAN_REPORT_DFID_NAME = 0x00000C00  # FAN_REPORT_DIR_FID | FAN_REPORT_NAME (Linux 5.9)
FAN_MARK_ADD = 0x00000001
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


class Fanotify:
    """One fanotify group with a mark per file system the tree reaches; a ``Watcher`` whose keys are
    (file system id, handle type, handle). ``interest`` holds the keys of the tree's folders: the
    reader thread keeps only changes to those."""

    kind = "fanotify"

    def __init__(self, interest: Container[Hashable]) -> None:
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
        self._interest = interest
        self._fsids: dict[int, bytes] = {}  # st_dev -> f_fsid of the file systems marked
        self._handle_flags = AT_EMPTY_PATH | AT_HANDLE_FID
        self._lock = threading.Lock()  # one reader at a time, and the pending set with it
        self._pending: set[Change] = set()
        self._lost: str | None = None
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._drain_forever, name="term2-fanotify", daemon=True)
        self._thread.start()

    # -- marks and keys -------------------------------------------------------

    def watch(self, folder_fd: int, st: os.stat_result) -> Hashable:
        """The key of the folder open as ``folder_fd``; its file system is marked the first time it is met.
        The mark is added through the descriptor itself, never a path."""
        fsid = self._fsids.get(st.st_dev)
        if fsid is None:
            fsid = _fsid(folder_fd)
            if fsid is None or fsid == bytes(8):
                raise Unwatchable("fanotify cannot tell this file system apart (no fsid)")
            if self._libc.fanotify_mark(self.fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FOLDER_EVENTS, folder_fd, None):
                raise Unwatchable(f"fanotify mark refused: {os.strerror(self._ctypes.get_errno())}")
            self._fsids[st.st_dev] = fsid
        return fsid + self._handle(folder_fd)

    def _handle(self, folder_fd: int) -> bytes:
        ctypes = self._ctypes
        buf = ctypes.create_string_buffer(8 + MAX_HANDLE_SZ)
        struct.pack_into("=Ii", buf, 0, MAX_HANDLE_SZ, 0)
        mount_id = ctypes.c_int()
        while True:
            if self._libc.name_to_handle_at(folder_fd, b"", buf, ctypes.byref(mount_id), self._handle_flags) == 0:
                size, kind = struct.unpack_from("=Ii", buf.raw)
                raw: bytes = buf.raw
                return struct.pack("=i", kind) + raw[8 : 8 + size]
            err = ctypes.get_errno()
            if err == 22 and self._handle_flags & AT_HANDLE_FID:  # EINVAL: a kernel before 6.5
                self._handle_flags &= ~AT_HANDLE_FID
                continue
            raise Unwatchable(f"no file handle for a folder: {os.strerror(err)}")

    def unwatch(self, key: Hashable) -> None:
        """Nothing to let go of in the kernel: the mark is the file system's."""

    # -- events -----------------------------------------------------------------

    def read(self) -> list[Change]:
        """The changes to the tree's folders queued up to now (drained here, not left to the thread)."""
        with self._lock:
            self._drain()
            changes, self._pending = list(self._pending), set()
            lost, self._lost = self._lost, None
        if lost is not None:
            raise EventsLost(lost)
        return changes

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
            with self._lock:
                if self.fd is None:
                    return
                self._drain()

    def _drain(self) -> None:
        """Read every queued event (the caller holds the lock) and keep those naming a folder of the tree."""
        assert self.fd is not None
        while True:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                return
            except OSError as exc:
                self._lost = f"fanotify read failed: {exc}"
                return
            if self._lost is None:
                self._lost = self._take(data)
                if self._lost is None and len(self._pending) > PENDING_MAX:
                    self._lost = f"more than {PENDING_MAX:,} folders changed"
            if self._lost is not None:
                self._pending.clear()  # the walk starts over: keep reading only to empty the queue

    def _take(self, data: bytes) -> str | None:
        offset = 0
        interest, pending = self._interest, self._pending
        while offset < len(data):
            event_len, version, _reserved, metadata_len, mask, fd, _pid = _METADATA.unpack_from(data, offset)
            if version != METADATA_VERSION or event_len < metadata_len:
                return f"fanotify event version {version} not understood"
            if fd >= 0:
                os.close(fd)  # never asked for: a group reporting handles opens none
            if mask & FAN_Q_OVERFLOW:
                return "fanotify queue overflow"
            info, end = offset + metadata_len, offset + event_len
            while info < end:
                info_type, _pad, info_len, fsid, handle_bytes, handle_type = _INFO.unpack_from(data, info)
                if info_len == 0:
                    return "an empty fanotify info record"
                if info_type in _INFO_WITH_HANDLE:
                    start = info + _INFO.size
                    key = fsid + struct.pack("=i", handle_type) + data[start : start + handle_bytes]
                    if key in interest:
                        name = data[start + handle_bytes : info + info_len].split(b"\0", 1)[0]
                        pending.add(Change(key, itself=bool(mask & _SELF) and name in (b".", b"")))
                info += info_len
            offset += event_len
        return None

    def close(self) -> None:
        if self.fd is None:
            return
        os.write(self._wake_w, b"x")
        if self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            os.close(self.fd)
            self.fd = None
        os.close(self._wake_r)
        os.close(self._wake_w)


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
