"""What `term2 doctor` says of the walks before and after commands: kept between them, or taken in full.

A user whose monorepo makes every command slow needs to know why without
reading a log: as root the walks are kept with one fanotify mark per file
system (ADR 0033) and no workspace is too big; otherwise each folder takes an
inotify watch (ADR 0031) and, past `fs.inotify.max_user_watches`, a fanotify
inode mark (Linux 5.13, `watch_spill`), and past both limits together the
workspace is walked in full around every command (never refused). The answer
is found the way a workspace gets it: a small tree made and scanned here, and
an inode mark tried on it.
"""

from __future__ import annotations

import shutil
import tempfile

from term2.adapters.sandbox.tree_scan import ScanIncomplete
from term2.adapters.sandbox.watch_spill import inode_marks_refused
from term2.adapters.sandbox.watched_folders import WATCHERS
from term2.adapters.sandbox.watched_tree import WatchedTree

WATCHES_FILE = "/proc/sys/fs/inotify/max_user_watches"
MARKS_FILE = "/proc/sys/fs/fanotify/max_user_marks"
RAISE = "sudo sysctl fs.inotify.max_user_watches=1048576"
RAISE_BOTH = "sudo sysctl fs.inotify.max_user_watches=1048576 fs.fanotify.max_user_marks=1048576"


def how_walks_are_kept(
    watchers: tuple[str, ...] = WATCHERS, watches_file: str = WATCHES_FILE, marks_file: str = MARKS_FILE
) -> str:
    folder = tempfile.mkdtemp(prefix="term2-walks-")
    tree = WatchedTree(folder, watchers=watchers)
    try:
        tree.scan(limit=16)
        kind = tree.watcher
        spill = inode_marks_refused(folder) if kind is not None and kind.startswith("inotify") else None
    except (OSError, ScanIncomplete) as err:
        return f"walked in full before and after every command ({err})"
    finally:
        tree.close()
        shutil.rmtree(folder, ignore_errors=True)
    if kind == "fanotify":
        return "kept between commands with fanotify (one mark per file system): no workspace is too big"
    if kind is None:
        return "walked in full before and after every command: neither fanotify nor inotify is available here"
    watches = _limit(watches_file)
    if spill is None:
        marks = _limit(marks_file)
        allowed = (
            f"{watches + marks:,} folders ({watches:,} inotify watches, then {marks:,} fanotify inode marks)"
            if watches is not None and marks is not None
            else "as many folders as fs.inotify.max_user_watches and fs.fanotify.max_user_marks together"
        )
        return (
            f"kept between commands with inotify, then fanotify inode marks, for up to {allowed}: a workspace with"
            f" more is walked in full before and after every command (to raise the limits: {RAISE_BOTH})"
        )
    allowed = f"{watches:,} folders" if watches is not None else "as many folders as fs.inotify.max_user_watches"
    return (
        f"kept between commands with inotify, for up to {allowed}: a workspace with more is walked in full"
        f" before and after every command (to raise the limit: {RAISE}; no fanotify inode marks: {spill})"
    )


def _limit(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return None
