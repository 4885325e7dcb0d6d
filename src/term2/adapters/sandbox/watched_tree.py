"""The workspace walk kept between commands: every folder watched, only changed folders listed again.

Before and after each command the sandbox needs the whole tree's ``.env``
files, git metadata, instruction files and (host-root runs) setid files
(``tree_scan``). Walking it in full costs ~7 us an entry on a small VM, 3.6 s
at 500,000 entries. So the first walk of a root builds a tree of folders,
each opened with ``O_NOFOLLOW`` relative to its parent and watched through
that descriptor: with one fanotify mark per file system as root (``fanotify``,
ADR 0033), else one inotify watch per folder (``inotify``) and, once
``fs.inotify.max_user_watches`` is spent, a fanotify mark per folder
(``watch_spill``). Every later scan
reads the kernel's events and lists again only the folders they name, in the
same way. Nothing is taken from timestamps: a command can set a folder's or a
file's mtime back, but it cannot keep the kernel from queueing the event of
its change.

What events alone do not cover is checked directly on every scan: instruction
files are ``lstat``'ed afresh (their content changes without a name changing,
and a hard link elsewhere changes them without an event on their folder), and
folders named like a git directory whose ``HEAD`` does not count yet are
listed again (writing ``HEAD`` changes no name).

Anything out of the ordinary falls back to the full walk, which stays the
reference: an event queue that overflowed, a watch lost, a folder that is not
what was listed at its path, more changed folders than a walk is worth, a
folder on a file system whose changes may bypass this kernel (NFS, FUSE),
term2's mount table changed, neither watches nor marks left. A scan that fails forgets the
tree, so the next one walks in full and fails the same way (fail closed).
Scans of one root hold its lock.

What the tree keeps and which watcher keeps it is ``watched_folders``; the
trees of one sandbox, by root, are ``tree_watches``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from term2.adapters.sandbox.folder_facts import list_folder
from term2.adapters.sandbox.folder_watch import EventsLost, Unwatchable
from term2.adapters.sandbox.inotify import trusted_file_system
from term2.adapters.sandbox.tree_scan import (
    DIR_FLAGS,
    SCAN_MAX_DEPTH,
    SCAN_MAX_ENTRIES,
    ScanIncomplete,
    TreeScan,
    open_below,
    unseen,
)
from term2.adapters.sandbox.watched_folders import Folder, NextWatcher, Rewalk, WatchedFolders, tell

# Past this many changed folders (or this share of all of them) one full walk is cheaper than
# opening each from the root.
REWALK_FOLDERS = 4096
REWALK_SHARE = 8


class WatchedTree(WatchedFolders):
    """One workspace root's folders, their facts and their watches; see the module docstring.

    ``watch=False`` walks in full on every scan (``tree_scan.scan_tree``); ``watchers`` are the kinds
    tried, in order (``WATCHERS``); ``group`` gives the fanotify group to share (else the tree has its own).
    """

    # -- scanning ---------------------------------------------------------------

    def scan(self, *, limit: int = SCAN_MAX_ENTRIES, setid: bool = False) -> TreeScan:
        """The tree as it is now; raise ScanIncomplete (or OSError) when it cannot all be seen."""
        with self.lock:
            self._listed = 0
            self._limit = limit
            try:
                if self._top is None or self._watcher is None or (setid and not self._setid):
                    self._walk_all(setid)
                else:
                    try:
                        self._refresh()
                    except Rewalk:
                        self._walk_all(setid)
                if self._total > limit:
                    raise ScanIncomplete(f"more than {limit:,} files and folders")
                scan = self._snapshot(setid)
            except BaseException:
                self._forget()
                raise
            self.history.append(self._listed)
            return scan

    def close(self) -> None:
        with self.lock:
            self._forget()
            self._unwatchable = "closed"

    def _forget(self) -> None:
        self._close_watcher()
        self._top = None
        self._entries.clear()
        self._notable.clear()
        self._total = 0

    def _walk_all(self, setid: bool) -> None:
        while True:
            self._forget()
            self._setid = setid
            self._start_watching()
            top = Folder(self.root, None, "", 0, False)
            fd = os.open(self.root, DIR_FLAGS)
            self._top = top
            try:
                self._walk(top, fd)
            except NextWatcher as exc:
                tell("sandbox.watcher_unavailable", root=self.root, watcher=self._kinds[0], reason=str(exc))
                del self._kinds[0]
                continue
            kind = self.watcher
            if kind is not None:
                tell("sandbox.walks_watched", root=self.root, watcher=kind, folders=len(self._entries))
            return

    # -- the walk of a subtree ----------------------------------------------------

    def _walk(self, start: Folder, fd: int) -> None:
        """List ``start`` (open as ``fd``, which this closes) and every folder below it."""
        frames: list[tuple[int, Folder, list[str]]] = []
        try:
            frames.append((fd, start, self._list(start, fd)))
            while frames:
                fd, folder, pending = frames[-1]
                if not pending:
                    frames.pop()
                    os.close(fd)
                    continue
                name = pending.pop()
                child = folder.children[name]
                if child.depth >= SCAN_MAX_DEPTH:
                    raise ScanIncomplete(f"folders nested more than {SCAN_MAX_DEPTH} deep under {folder.path}")
                try:
                    child_fd = os.open(name, DIR_FLAGS, dir_fd=fd)
                except PermissionError:
                    raise unseen(child.path) from None
                except OSError:
                    del folder.children[name]  # gone, or swapped for a link since it was listed: nothing to walk
                    child.detached = True
                    continue
                try:
                    frames.append((child_fd, child, self._list(child, child_fd)))
                except BaseException:
                    os.close(child_fd)
                    raise
        except BaseException:
            for frame_fd, _folder, _pending in frames:
                os.close(frame_fd)
            if not frames:
                os.close(fd)
            raise

    def _list(self, folder: Folder, fd: int) -> list[str]:
        """Watch, then list, one folder newly met; return its subfolders' names, still to walk."""
        if self._watcher is not None:  # a full walk every time needs no identities
            st = os.fstat(fd)
            folder.ident = (st.st_dev, st.st_ino)
            parent_dev = folder.parent.ident[0] if folder.parent is not None else None
            if st.st_dev != parent_dev and not trusted_file_system(fd):
                self._stop_watching(f"{folder.path} is on a file system whose changes may bypass this kernel")
            else:
                self._watch(folder, fd, st)
        return sorted(self._apply(folder, fd), reverse=True)

    def _apply(self, folder: Folder, fd: int) -> list[str]:
        """List ``folder`` and take in what it now holds; return the subfolders new or replaced, still unlisted."""
        others = self._total - self._entries.get(folder, 0)
        listing = list_folder(
            fd,
            folder.path,
            top=folder.parent is None,
            quiet=folder.quiet,
            setid=self._setid,
            budget=self._limit - others,
            limit=self._limit,
        )
        self._listed += 1
        self._entries[folder] = listing.entries
        self._total = others + listing.entries
        folder.facts = listing.facts
        if listing.facts is None:
            self._notable.discard(folder)
        else:
            self._notable.add(folder)
        for name, child in list(folder.children.items()):
            if listing.subdirs.get(name) != (child.inode, child.quiet):
                self._drop(child)
                del folder.children[name]
        new = [name for name in listing.subdirs if name not in folder.children]
        for name in new:
            inode, quiet = listing.subdirs[name]
            folder.children[name] = Folder(os.path.join(folder.path, name), folder, name, inode, quiet)
        return new

    def _drop(self, folder: Folder) -> None:
        """Let go of a subtree no longer there (its watches too, unless its folders are watched elsewhere now)."""
        for gone in _subtree(folder):
            gone.detached = True
            self._total -= self._entries.pop(gone, 0)
            self._notable.discard(gone)
            if gone.key is None:
                continue
            shown = self._keys.get(gone.key, [])
            if gone in shown:
                shown.remove(gone)
                if not shown:
                    del self._keys[gone.key]
                    if self._watcher is not None:
                        self._watcher.unwatch(gone.key)

    # -- the events ---------------------------------------------------------------

    def _refresh(self) -> None:
        assert self._watcher is not None and self._mounts is not None
        if self._mounts.changed():
            raise Rewalk  # a mount on, or off, a folder of the tree changes it with no event
        dirty: set[Folder] = {folder for folder in self._notable if folder.facts and folder.facts.head_pending}
        lost: list[Folder] = []
        try:
            changes = self._watcher.read()
        except EventsLost:
            raise Rewalk from None
        for change in changes:
            folders = self._keys.get(change.key)
            if folders is None:
                continue  # a watch let go here: its folder was dropped with its parent's listing
            if change.lost:
                del self._keys[change.key]
            for folder in folders:
                if change.lost:
                    folder.key = None
                    lost.append(folder)
                else:
                    dirty.add(folder)
                if change.itself and folder.parent is not None:
                    dirty.add(folder.parent)
        if len(dirty) > min(REWALK_FOLDERS, max(64, len(self._entries) // REWALK_SHARE)):
            raise Rewalk
        for folder in sorted(dirty, key=lambda f: f.depth):
            if not folder.detached:
                self._relist(folder)
        if any(not folder.detached for folder in lost):
            raise Rewalk  # still there, no longer watched (its file system went away under it?)

    def _relist(self, folder: Folder) -> None:
        """List a changed folder again, reached from the root as the walk reaches it, and walk what is new."""
        try:
            fd = open_below(self.root, folder.path)
        except PermissionError:
            raise unseen(folder.path) from None
        except OSError:
            raise Rewalk from None  # gone or replaced, and its parent's events did not say so
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != folder.ident:
                raise Rewalk
            if self._made_again(folder, fd, st):
                return
            for name in sorted(self._apply(folder, fd)):
                self._walk_new(folder, fd, folder.children[name])
        finally:
            os.close(fd)

    def _made_again(self, folder: Folder, fd: int, st: os.stat_result) -> bool:
        """Whether the folder at ``folder``'s path is another one under the same inode number (ext4 gives a
        freed number straight back: ``rm -rf d && mkdir d``), which its key tells (another file handle
        generation, another inotify watch): then its old subtree is dropped and the new one walked and
        watched in full, since events inside it name its new key, which the tree did not know."""
        if self._watcher is None or folder.key is None:
            return False
        try:
            if self._watcher.watch(fd, st) == folder.key:
                return False
        except Unwatchable:
            raise Rewalk from None
        parent = folder.parent
        if parent is None:
            raise Rewalk  # the root itself made again
        self._drop(folder)
        del parent.children[folder.name]
        again = parent.children[folder.name] = Folder(folder.path, parent, folder.name, folder.inode, folder.quiet)
        self._walk(again, os.dup(fd))
        return True

    def _walk_new(self, parent: Folder, parent_fd: int, child: Folder) -> None:
        if child.depth >= SCAN_MAX_DEPTH:
            raise ScanIncomplete(f"folders nested more than {SCAN_MAX_DEPTH} deep under {parent.path}")
        try:
            fd = os.open(child.name, DIR_FLAGS, dir_fd=parent_fd)
        except PermissionError:
            raise unseen(child.path) from None
        except OSError:
            del parent.children[child.name]
            child.detached = True
            return
        self._walk(child, fd)

    # -- the result ---------------------------------------------------------------

    def _snapshot(self, setid: bool) -> TreeScan:
        scan = TreeScan(self.root, entries=self._total, listed=self._listed)
        for folder in sorted(self._notable, key=lambda f: f.path):
            facts = folder.facts
            assert facts is not None
            scan.env_files += facts.env_files
            scan.secret_links += facts.secret_links
            for mark in facts.marks:
                scan.marks[mark.path] = mark
            if setid:
                scan.setid_files += facts.setid_files
            for path in facts.instructions:
                try:
                    st = os.lstat(path)
                except OSError:
                    continue  # gone since it was listed: the next scan tells whether it came back
                scan.instructions[path] = (st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return scan


def _subtree(folder: Folder) -> Iterator[Folder]:
    stack = [folder]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children.values())
