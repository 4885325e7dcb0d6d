"""One root's folders as the kept walk last listed them, and the watcher that keeps them (ADR 0031, 0033).

The walk and the events (``watched_tree``) need, for every folder they meet,
a key from a watcher taken before the folder is listed; which watcher that is
can change under a walk: fanotify refused for a file system, inotify's budget
spent, a file system whose changes may bypass this kernel. Choosing one,
watching a folder with it and giving it up for full walks live here, with the
state the tree keeps, so that the scan reads as when to list what.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Hashable

from term2.adapters.sandbox.fanotify import Fanotify, FanotifyGroup
from term2.adapters.sandbox.folder_facts import Facts
from term2.adapters.sandbox.folder_watch import MountTable, Unwatchable, Watcher
from term2.adapters.sandbox.tree_scan import SCAN_MAX_ENTRIES
from term2.adapters.sandbox.watch_spill import InotifyThenFanotify
from term2.support.deferred_log import get_logger

_log = get_logger(__name__)

# Tried in this order: fanotify needs CAP_SYS_ADMIN but no watch per folder; inotify works for anyone, and
# spills to fanotify inode marks (Linux 5.13, unprivileged) past its watch limit.
WATCHERS: tuple[str, ...] = ("fanotify", "inotify")


class Rewalk(Exception):
    """The events do not give a consistent picture: walk the whole tree again."""


class NextWatcher(Rewalk):
    """This watcher cannot watch the whole tree (a file system fanotify cannot mark or name): try the next."""


class Folder:
    """One folder of the tree as last listed."""

    __slots__ = ("children", "depth", "detached", "facts", "ident", "inode", "key", "name", "parent", "path", "quiet")

    def __init__(self, path: str, parent: Folder | None, name: str, inode: int, quiet: bool) -> None:
        self.path = path
        self.parent = parent
        self.name = name
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.inode = inode  # as its parent listed it
        self.quiet = quiet
        self.ident: tuple[int, int] = (0, 0)  # (st_dev, st_ino) of the folder opened
        self.key: Hashable | None = None  # the watcher's name for it
        self.children: dict[str, Folder] = {}
        self.facts: Facts | None = None
        self.detached = False


class WatchedFolders:
    """The state ``WatchedTree`` scans (its arguments are described there) and the watcher keeping it:
    kept apart so that a watcher given up mid-walk is one call here, not a branch of the walk."""

    def __init__(
        self,
        root: str,
        *,
        watch: bool = True,
        watchers: tuple[str, ...] = WATCHERS,
        group: Callable[[], FanotifyGroup] | None = None,
    ) -> None:
        self.root = root
        self.lock = threading.Lock()
        self._top: Folder | None = None
        self._setid = False
        self._entries: dict[Folder, int] = {}
        self._total = 0
        self._notable: set[Folder] = set()
        self._keys: dict[Hashable, list[Folder]] = {}  # a bind mount can show one folder at two places
        self._watcher: Watcher | None = None
        self._mounts: MountTable | None = None
        self._kinds = list(watchers)
        self._group = group
        self._unwatchable: str | None = None if watch and watchers else "not asked to watch"
        self._listed = 0
        self._limit = SCAN_MAX_ENTRIES
        self.history: deque[int] = deque(maxlen=64)  # folders listed by each scan, for tests and benchmarks

    @property
    def watcher(self) -> str | None:
        """The kind of watcher the tree is kept with now ("fanotify", "inotify", "inotify+fanotify" once spilled),
        None when walked in full."""
        return None if self._watcher is None else self._watcher.kind

    def _close_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        if self._mounts is not None:
            self._mounts.close()
            self._mounts = None
        self._keys.clear()

    def _start_watching(self) -> None:
        """The first watcher of ``self._kinds`` this process can have, before anything is listed."""
        while self._unwatchable is None and self._kinds:
            try:
                if self._kinds[0] == "fanotify":
                    fanotify = Fanotify(self._keys, None if self._group is None else self._group())
                    fanotify.group.revalidate()  # a file system mounted since may have an old one's st_dev
                    self._watcher = fanotify
                else:
                    self._watcher = InotifyThenFanotify(self._keys)
                self._mounts = MountTable()
                return
            except (Unwatchable, OSError) as exc:
                self._close_watcher()
                tell("sandbox.watcher_unavailable", root=self.root, watcher=self._kinds[0], reason=str(exc))
                del self._kinds[0]
        if self._unwatchable is None:
            self._stop_watching("no watcher left to try")

    def _stop_watching(self, why: str) -> None:
        """Walk in full from now on: safe everywhere, only slower."""
        if self._unwatchable is None:
            _log.warning("sandbox.walks_unwatched", root=self.root, reason=why)
        self._unwatchable = why
        self._close_watcher()

    def _watch(self, folder: Folder, fd: int, st: os.stat_result) -> None:
        if self._watcher is not None:
            try:
                key = self._watcher.watch(fd, st)  # before listing: what changes after, an event says
            except Unwatchable as exc:
                if self._watcher.kind == "fanotify" and len(self._kinds) > 1:
                    raise NextWatcher(str(exc)) from None  # the root is logged with it
                self._stop_watching(str(exc))
            else:
                folder.key = key
                self._keys.setdefault(key, []).append(folder)


_told: set[tuple[str, str, str]] = set()


def tell(event: str, *, root: str, watcher: str, **more: object) -> None:
    """Which watcher the walks are kept with, or why one is not used: logged the first time in the process
    for each (event, watcher, reason), not for every root and every walk."""
    said = (event, watcher, str(more.get("reason", "")))
    if said not in _told:
        _told.add(said)
        _log.info(event, root=root, watcher=watcher, **more)
