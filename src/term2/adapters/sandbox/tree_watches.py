"""The kept walks of one sandbox, by root (ADR 0031, 0033, 0050).

A sandbox walks every root it binds before and after each command; keeping
each root's tree, up to ``WATCHED_ROOTS`` (the least recently used let go with
its watches), spares a full walk per root per command, and one fanotify group
shared by the trees parses each event once whichever root it falls in.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from term2.adapters.sandbox.fanotify import FanotifyGroup
from term2.adapters.sandbox.folder_watch import Unwatchable
from term2.adapters.sandbox.tree_scan import SCAN_MAX_ENTRIES, TreeScan
from term2.adapters.sandbox.watched_folders import WATCHERS
from term2.adapters.sandbox.watched_tree import WatchedTree

WATCHED_ROOTS = 8  # roots whose walk (and watches) one sandbox keeps; the least recently used goes


class TreeWatches:
    """The watched trees of one sandbox, by root; the least recently used beyond WATCHED_ROOTS let go.
    Their fanotify watchers share one group (one reader thread, each event parsed once)."""

    def __init__(self, capacity: int = WATCHED_ROOTS, watchers: tuple[str, ...] = WATCHERS) -> None:
        self._capacity = capacity
        self.watchers = watchers  # for trees made from now on
        self._group: FanotifyGroup | None = None
        self._refused: str | None = None  # fanotify refused for good (no CAP_SYS_ADMIN): no group made again
        self._trees: OrderedDict[str, WatchedTree] = OrderedDict()
        self._lock = threading.Lock()
        self._group_lock = threading.Lock()

    def tree(self, root: str) -> WatchedTree:
        with self._lock:
            tree = self._trees.get(root)
            if tree is None:
                tree = self._trees[root] = WatchedTree(root, watchers=self.watchers, group=self._fanotify)
            self._trees.move_to_end(root)
            for old_root, old in list(self._trees.items())[: max(0, len(self._trees) - self._capacity)]:
                if old.lock.acquire(blocking=False):  # one in use is let go next time
                    try:
                        old._forget()
                    finally:
                        old.lock.release()
                    del self._trees[old_root]
            return tree

    def scan(self, root: str, *, limit: int = SCAN_MAX_ENTRIES, setid: bool = False) -> TreeScan:
        return self.tree(root).scan(limit=limit, setid=setid)

    def _fanotify(self) -> FanotifyGroup:
        """The group the trees share, made when the first one asks (Unwatchable when fanotify is refused)."""
        with self._group_lock:
            if self._refused is None and self._group is not None and self._group.refused is not None:
                self._refused = self._group.refused  # no tree of this sandbox can use it: let its fd go
                self._group.close()
                self._group = None
            if self._refused is not None:
                raise Unwatchable(self._refused)
            if self._group is None or self._group.fd is None:
                self._group = FanotifyGroup()
            return self._group

    def close(self) -> None:
        with self._lock:
            for tree in self._trees.values():
                tree.close()
            self._trees.clear()
            with self._group_lock:
                if self._group is not None:
                    self._group.close()
                    self._group = None
