"""What the kept walk needs from a kernel change-notification API, inotify's or fanotify's (ADR 0031, 0033).

The walk (``watched_tree``) asks a watcher for a key per folder it meets, taken
from the folder's open descriptor before the folder is listed, and later for
the changes queued since: each names a key, so a folder, that must be listed
again. A watcher that cannot promise every change raises ``EventsLost`` (the
queue overflowed, a file system went away, an event it does not understand)
and the walk starts over in full; one that cannot watch a folder at all raises
``Unwatchable``.
"""

from __future__ import annotations

import os
import select
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol


class Unwatchable(Exception):
    """This API cannot watch here (no symbol, no permission, no instance or watch left, a file system it
    cannot report on): use another, or walk in full."""


class OutOfWatches(Unwatchable):
    """The per-user budget of this API is spent (``ENOSPC``: ``fs.inotify.max_user_watches``,
    ``fs.fanotify.max_user_marks``): another API with a budget of its own may still watch."""


class EventsLost(Exception):
    """Some changes may have happened with no event queued for them: only a full walk can tell."""


@dataclass(frozen=True, slots=True)
class Change:
    """A folder (by its key) whose names or attributes changed, or that itself was deleted or moved."""

    key: Hashable
    itself: bool = False  # the folder itself was deleted or moved: its parent's listing changed as well
    lost: bool = False  # no more events will come for it (inotify let go of its watch)


class Watcher(Protocol):
    kind: str  # "fanotify", "inotify" or "inotify+fanotify" (spilled, ``watch_spill``), for the log and the tests

    def watch(self, folder_fd: int, st: os.stat_result) -> Hashable:
        """Start (or go on) reporting changes to the folder open as ``folder_fd``; its key."""

    def unwatch(self, key: Hashable) -> None:
        """No folder of the tree has this key any more."""

    def read(self) -> list[Change]:
        """Every change queued up to now; never blocks. Raise EventsLost when some may be missing."""

    def close(self) -> None: ...


class MountTable:
    """Whether term2's mount table changed: a file system mounted on or unmounted from a folder of the tree
    changes what its path shows with no event on any folder. ``/proc/self/mountinfo`` polls with
    POLLPRI after each change in this mount namespace (a sandbox's own mounts are in its own)."""

    def __init__(self) -> None:
        self._fd: int | None = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLPRI | select.POLLERR)
        self.changed()  # the flag is set until first polled

    def changed(self) -> bool:
        """Whether it changed since the last call (polling resets the kernel's flag)."""
        return any(mask & (select.POLLPRI | select.POLLERR) for _fd, mask in self._poll.poll(0))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
