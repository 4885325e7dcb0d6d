"""The kept walk's watcher past fs.inotify.max_user_watches (``watch_spill``): inotify, then fanotify inode marks.

Through the real kernel (inotify and fanotify inode marks need no privilege
since Linux 5.13), with the per-user budgets cut by ``limit_inotify_watches``
and ``limit_fanotify_marks``: the machine's own are too big to reach in a test
and not to be lowered for one. The limiters are shared with the threat suite
(tests/sandbox/test_threats_spill.py, test_threats_big_tree.py).
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from term2.adapters.sandbox import watch_spill
from term2.adapters.sandbox.folder_watch import EventsLost, OutOfWatches, Unwatchable
from term2.adapters.sandbox.watch_spill import InotifyThenFanotify, inode_marks_refused


class _Setattr(Protocol):
    def setattr(self, target: object, name: str, value: object) -> None: ...


def limit_inotify_watches(monkeypatch: _Setattr, watches: int) -> None:
    """fs.inotify.max_user_watches reached after ``watches`` folders: inotify_add_watch fails with ENOSPC for
    a new inode, and gives back an inode's watch as the kernel does (counted per process, never given back)."""
    from term2.adapters.sandbox import inotify

    def inode(args: tuple[Any, ...]) -> tuple[int, int]:
        st = os.stat(args[1])  # /proc/self/fd/N: the folder's descriptor
        return st.st_dev, st.st_ino

    monkeypatch.setattr(inotify, "_libc", _budgeted(inotify._libc, "inotify_add_watch", watches, inode))


def limit_fanotify_marks(monkeypatch: _Setattr, marks: int) -> None:
    """fs.fanotify.max_user_marks reached after ``marks`` inode marks: fanotify_mark fails with ENOSPC."""
    from term2.adapters.sandbox import fanotify

    def inode(args: tuple[Any, ...]) -> tuple[int, int] | None:
        if args[1] & fanotify.FAN_MARK_FILESYSTEM:
            return None  # not counted here (one a file system)
        st = os.fstat(args[3])
        return st.st_dev, st.st_ino

    monkeypatch.setattr(fanotify, "_libc", _budgeted(fanotify._libc, "fanotify_mark", marks, inode))


def _budgeted(
    real: Callable[[], tuple[Any, Any]],
    call: str,
    budget: int,
    inode: Callable[[tuple[Any, ...]], object],
    error: int = errno.ENOSPC,
) -> Callable[[], tuple[Any, Any]]:
    """A stand-in for a module's ``_libc()`` whose ``call`` fails with ``error`` once ``budget`` inodes have one."""
    seen: set[object] = set()

    class Libc:
        def __init__(self, libc: Any) -> None:
            self._libc = libc

        def __getattr__(self, name: str) -> Any:
            return getattr(self._libc, name)

    def libc() -> tuple[Any, Any]:
        lib, ctypes = real()
        wrapped = Libc(lib)
        real_call = getattr(lib, call)

        def limited(*args: Any) -> Any:
            key = inode(args)
            if key is not None and key not in seen:
                if len(seen) >= budget:
                    ctypes.set_errno(error)
                    return -1
                seen.add(key)
            return real_call(*args)

        setattr(wrapped, call, limited)
        return wrapped, ctypes

    return libc


if inode_marks_refused(os.getcwd()) is not None:
    pytest.skip(f"no fanotify inode marks here: {inode_marks_refused(os.getcwd())}", allow_module_level=True)


class Tree:
    """Folders watched in order, their keys kept as the walk keeps them (the fanotify half's interest)."""

    def __init__(self, root: Path, count: int) -> None:
        self.folders = [root / f"d{i}" for i in range(count)]
        for folder in self.folders:
            folder.mkdir()
        self.keys: dict[Hashable, Path] = {}
        self.watcher = InotifyThenFanotify(self.keys)

    def watch(self, folder: Path) -> Hashable:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            key = self.watcher.watch(fd, os.fstat(fd))
        finally:
            os.close(fd)
        self.keys[key] = folder
        return key

    def watch_all(self) -> list[Hashable]:
        return [self.watch(folder) for folder in self.folders]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tree]:
    limit_inotify_watches(monkeypatch, 3)
    made = Tree(tmp_path, 6)
    yield made
    made.watcher.close()


def readers() -> int:
    return sum(thread.name == "term2-fanotify" for thread in threading.enumerate())


def test_folders_past_the_inotify_budget_get_inode_marks_and_keep_their_keys(tree: Tree) -> None:
    keys = tree.watch_all()
    assert [type(key) for key in keys] == [int] * 3 + [bytes] * 3
    assert tree.watcher.kind == "inotify+fanotify"
    assert [tree.watch(folder) for folder in tree.folders] == keys  # asked again: the same key, either half


def test_a_folder_made_again_gets_another_key(tree: Tree) -> None:
    keys = tree.watch_all()
    for i in (1, 4):  # one of each half
        tree.folders[i].rmdir()
        tree.folders[i].mkdir()
        assert tree.watch(tree.folders[i]) != keys[i]


def test_changes_in_either_half_are_read(tree: Tree) -> None:
    keys = tree.watch_all()
    assert tree.watcher.read() == []
    (tree.folders[0] / ".env").write_text("x")
    (tree.folders[5] / ".env").write_text("x")
    (tree.folders[4] / "sub").mkdir()
    assert {change.key for change in tree.watcher.read()} == {keys[0], keys[4], keys[5]}
    tree.folders[5].joinpath(".env").unlink()
    tree.folders[5].rmdir()  # its mark goes with its inode, after saying so
    assert any(c.key == keys[5] and c.itself for c in tree.watcher.read())


def test_the_reader_thread_and_group_come_with_the_spill_only(tree: Tree) -> None:
    before = readers()
    for folder in tree.folders[:3]:
        tree.watch(folder)
    assert readers() == before and tree.watcher._fanotify is None
    tree.watch(tree.folders[3])
    assert readers() == before + 1
    tree.watcher.close()
    assert readers() == before


def test_a_refusal_other_than_no_watches_left_is_no_spill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from term2.adapters.sandbox import inotify

    monkeypatch.setattr(inotify, "_libc", _budgeted(inotify._libc, "inotify_add_watch", 0, lambda a: a, errno.EACCES))
    tree = Tree(tmp_path, 1)
    with pytest.raises(Unwatchable) as refused:
        tree.watch(tree.folders[0])
    assert not isinstance(refused.value, OutOfWatches) and tree.watcher._fanotify is None
    tree.watcher.close()


def test_past_both_budgets_no_folder_is_watched(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    limit_fanotify_marks(monkeypatch, 2)
    keys = [tree.watch(folder) for folder in tree.folders[:5]]
    with pytest.raises(OutOfWatches):  # the walk then goes on in full (WatchedTree._stop_watching)
        tree.watch(tree.folders[5])
    assert [type(key) for key in keys] == [int] * 3 + [bytes] * 2


def test_a_queue_overflow_in_the_spilled_half_is_events_lost(tree: Tree) -> None:
    tree.watch_all()
    assert tree.watcher._fanotify is not None
    folder = os.fsencode(tree.folders[5])
    with tree.watcher._fanotify.group.lock:  # the reader thread drains as events come: held off
        for i in range(17_000):  # past the kernel's 16,384 queued events
            name = folder + b"/f%d" % i
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644))
            os.unlink(name)
    with pytest.raises(EventsLost, match="overflow"):
        tree.watcher.read()


def test_marks_held_for_folders_gone_from_the_tree_are_bounded(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mark cannot be removed once the folder left the tree (no descriptor for it): past a bound the
    watcher says events were lost, the walk starts over and the group, with all its marks, is closed."""
    monkeypatch.setattr(watch_spill, "UNWATCHED_MAX", 2)
    keys = tree.watch_all()
    for key in keys[:5]:
        tree.watcher.unwatch(key)  # three inotify watches (removed), then two marks (counted)
    tree.watcher.read()
    tree.watcher.unwatch(keys[5])
    with pytest.raises(EventsLost, match="no longer in the tree"):
        tree.watcher.read()


def test_an_event_the_kernel_could_not_give_a_handle_is_events_lost(tree: Tree) -> None:
    """fanotify queues a change even when encoding its folder's handle failed (a failed allocation for a handle
    longer than 12 bytes: btrfs, overlayfs), with no handle record or an invalid one. Whose change it was is
    unknown, so nothing can be relisted for it: only a full walk can tell. Before, it was dropped unnoticed."""
    from term2.adapters.sandbox import fanotify

    tree.watch_all()
    spill = tree.watcher._fanotify
    assert spill is not None
    mask = fanotify.FAN_CREATE | fanotify.FAN_ONDIR
    bare = fanotify._METADATA.pack(
        fanotify._METADATA.size, fanotify.METADATA_VERSION, 0, fanotify._METADATA.size, mask, -1, 0
    )
    invalid_info = fanotify._INFO.pack(2, 0, fanotify._INFO.size + 4, bytes(8), 0, 0xFF) + b".\0\0\0"
    invalid = (
        fanotify._METADATA.pack(fanotify._METADATA.size + len(invalid_info), fanotify.METADATA_VERSION, 0,
                                fanotify._METADATA.size, mask, -1, 0)
        + invalid_info
    )  # fmt: skip
    for event in (bare, invalid):
        with spill.group.lock:
            lost = spill.group._take(event)
        assert lost is not None and "handle" in lost
