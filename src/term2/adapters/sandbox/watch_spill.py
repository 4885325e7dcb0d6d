"""inotify watches first, fanotify inode marks once they run out: the kept walk unprivileged (ADR 0031, 0033).

Unprivileged, fanotify's filesystem mark is refused and each folder takes an
inotify watch: past ``fs.inotify.max_user_watches`` (192,536 on a 23 GB
machine; an npm-shaped tree of 1.5M entries has 214,000 folders)
``inotify_add_watch`` fails with ``ENOSPC`` and the tree used to be walked in
full around every command. Since Linux 5.13 the same process may mark single
inodes with fanotify, counted against ``fs.fanotify.max_user_marks``, a budget
of its own: the folders inotify refuses for lack of watches get a fanotify inode
mark instead (through the folder's descriptor, as every mark here), so a tree
is kept with both budgets together. Past both, the walk is taken in full as
before; any other refusal is not a spill either.

Keys never collide: inotify's are ints (watch descriptors), fanotify's bytes
(file system id and file handle). A folder keeps the key it was first given:
asked again (a folder relisted is checked to be the one watched,
``WatchedTree._made_again``), a handle the tree knows is given back before
inotify is tried (marked again through the descriptor: two inodes of cloned
file systems share a key, and each needs its own mark), and inotify gives back an inode's existing watch even when
none is left, so only a new inode (another generation at the same number)
gets a new key.

A fanotify inode mark cannot be removed without a descriptor of its folder,
which the tree no longer has when a folder leaves it: a folder deleted takes its
mark with its inode, one moved out of the tree keeps it, its events dropped as
naming no folder of the tree. Those are counted, and past ``UNWATCHED_MAX`` the
next read says events were lost: the walk starts over with a new group, and
closing the old one lets go of all its marks. So the marks held for folders
outside the tree stay under a few thousand.
"""

from __future__ import annotations

import os
from collections.abc import Container, Hashable

from term2.adapters.sandbox.fanotify import Fanotify, FanotifyGroup
from term2.adapters.sandbox.folder_watch import Change, EventsLost, OutOfWatches, Unwatchable
from term2.adapters.sandbox.inotify import Inotify

# fanotify keys let go of (folders deleted or moved out) before the group is made again with a full walk.
UNWATCHED_MAX = 4096


class InotifyThenFanotify:
    """A ``Watcher`` (``folder_watch``): inotify watches, then fanotify inode marks once inotify answers
    ``ENOSPC``. ``interest`` holds the keys of the tree's folders (its fanotify half keeps only their
    changes). The fanotify group, and its reader thread, are made only when the first folder spills."""

    kind = "inotify"

    def __init__(self, interest: Container[Hashable]) -> None:
        self._inotify = Inotify()
        self._interest = interest
        self._fanotify: Fanotify | None = None
        self._unwatched = 0

    def watch(self, folder_fd: int, st: os.stat_result) -> Hashable:
        fanotify = self._fanotify
        if fanotify is not None:
            try:
                known: bytes | None = fanotify.group.name(folder_fd, st)
            except Unwatchable:
                known = None  # fanotify cannot name it, so never marked it: inotify may still watch it
            if known in self._interest:
                # The same key, and no inotify watch taken from elsewhere; but marked through this very
                # descriptor all the same (the same inode's mark is not added twice): a key names an inode
                # only within one file system, and a clone of it (a copied image) has the same f_fsid and,
                # folder for folder, the same handles. Given back unmarked, such a folder reported nothing.
                return fanotify.watch(folder_fd, st)
        try:
            return self._inotify.watch(folder_fd, st)
        except OutOfWatches:
            if fanotify is None:  # raises Unwatchable (no fanotify, a kernel before 5.13): full walks
                fanotify = self._fanotify = Fanotify(self._interest, FanotifyGroup(inode_marks=True))
                self.kind = "inotify+fanotify"
        return fanotify.watch(folder_fd, st)  # OutOfWatches past fs.fanotify.max_user_marks too: full walks

    def unwatch(self, key: Hashable) -> None:
        if isinstance(key, int):
            self._inotify.unwatch(key)
        else:
            self._unwatched += 1  # its mark stays while its inode lives (see the module docstring)

    def read(self) -> list[Change]:
        """Both halves' changes up to now; EventsLost when either lost some, or too many marks are held for
        folders no longer in the tree."""
        changes = self._inotify.read()
        if self._fanotify is not None:
            changes += self._fanotify.read()
            if self._unwatched > UNWATCHED_MAX:
                raise EventsLost(f"{self._unwatched:,} fanotify inode marks held for folders no longer in the tree")
        return changes

    def close(self) -> None:
        self._inotify.close()
        if self._fanotify is not None:
            self._fanotify.close()
            self._fanotify.group.close()  # its inode marks go with it
            self._fanotify = None


def inode_marks_refused(folder: str) -> str | None:
    """Why this process could not spill to fanotify inode marks (tried on ``folder``), None when it can."""
    try:
        group = FanotifyGroup(inode_marks=True)
    except Unwatchable as exc:
        return str(exc)
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            group.key(fd, os.fstat(fd))
        finally:
            os.close(fd)
    except (Unwatchable, OSError) as exc:
        return str(exc)
    finally:
        group.close()
    return None
