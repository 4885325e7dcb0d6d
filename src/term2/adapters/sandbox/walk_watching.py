"""What `term2 doctor` says of the walks before and after commands: kept between them, or taken in full.

A user whose monorepo makes every command slow needs to know why without
reading a log: as root the walks are kept with one fanotify mark per file
system (ADR 0033) and no workspace is too big; otherwise each folder takes an
inotify watch (ADR 0031), and past `fs.inotify.max_user_watches` folders the
workspace is walked in full around every command (never refused). The answer
is found the way a workspace gets it: a small tree made and scanned here.
"""

from __future__ import annotations

import shutil
import tempfile

from term2.adapters.sandbox.tree_scan import ScanIncomplete
from term2.adapters.sandbox.watched_tree import WATCHERS, WatchedTree

WATCHES_FILE = "/proc/sys/fs/inotify/max_user_watches"
RAISE = "sudo sysctl fs.inotify.max_user_watches=1048576"


def how_walks_are_kept(watchers: tuple[str, ...] = WATCHERS, watches_file: str = WATCHES_FILE) -> str:
    folder = tempfile.mkdtemp(prefix="term2-walks-")
    tree = WatchedTree(folder, watchers=watchers)
    try:
        tree.scan(limit=16)
        kind = tree.watcher
    except (OSError, ScanIncomplete) as err:
        return f"walked in full before and after every command ({err})"
    finally:
        tree.close()
        shutil.rmtree(folder, ignore_errors=True)
    if kind == "fanotify":
        return "kept between commands with fanotify (one mark per file system): no workspace is too big"
    limit = _watches(watches_file)
    if kind == "inotify":
        allowed = f"{limit:,} folders" if limit is not None else "as many folders as fs.inotify.max_user_watches"
        return (
            f"kept between commands with inotify, for up to {allowed}: a workspace with more is walked in full"
            f" before and after every command (to raise the limit: {RAISE})"
        )
    return "walked in full before and after every command: neither fanotify nor inotify is available here"


def _watches(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return None
