"""Find, before an edit is judged, whether it would plant a git directory in the root.

The pure rule (domain/footholds.py) needs the names already in each folder
between the root and the target; this module looks them up through
descriptors (anchored.py), and fails closed: a folder that cannot be looked
at, or a symlink met on the way, counts as a plant, so the user is asked.
"""

from __future__ import annotations

import os
import stat

from term2.app.tools.anchored import FOLDER
from term2.domain.footholds import GIT_DIR_KEYS, git_shape_depth
from term2.domain.workspace import is_within


def git_plant_folder(path: str, root: str) -> str | None:
    """The folder an edit of the canonical `path` would make (or finds) a git directory."""
    if not is_within(path, root) or path == root:
        return None
    parts = os.path.relpath(path, root).split("/")
    try:
        entries = _git_names_on_the_way(root, parts)
    except OSError:
        return os.path.dirname(path)
    depth = git_shape_depth(parts, entries)
    return None if depth is None else os.path.join(root, *parts[:depth])


def _git_names_on_the_way(root: str, parts: list[str]) -> list[frozenset[str]]:
    """For the root and each existing folder below it on the way to `parts`, the git names it holds."""
    entries: list[frozenset[str]] = []
    fd = os.open(root, FOLDER)
    try:
        for index, name in enumerate(parts):
            entries.append(frozenset(key for key in GIT_DIR_KEYS if _present(fd, key)))
            if index == len(parts) - 1:
                break
            try:
                child = os.open(name, FOLDER, dir_fd=fd)
            except FileNotFoundError:
                break  # a missing folder holds nothing
            except NotADirectoryError:
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise
                break  # a file in the way: the edit itself will fail
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    return entries


def _present(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
