"""Which sandboxed programs could redirect a path term2 hands to the editor (ADR 0038).

The editor opens the path string it is sent and follows symlinks, as editors
do; term2's descriptors cannot ride along. A path can be redirected only by
whoever may change an entry of a folder on its way: a program whose writable
root is that folder or one above it. So an editor request on `P` conflicts
with a program on root `R` exactly when `R` is one of the folders from `/`
down to the folder holding `P`. Folders are named by identity (device,
inode), not by path: two paths to one folder (a bind mount) are one folder,
and a path swapped between two looks is not mistaken for the folder judged.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class FolderId:
    """A folder as the kernel knows it: stat's (st_dev, st_ino)."""

    device: int
    inode: int


def folders_on_the_way(path: str) -> tuple[str, ...]:
    """The folders whose entries lead to the absolute, canonical `path`: `/` down to its parent, in order."""
    if not posixpath.isabs(path):
        raise ValueError(f"not an absolute path: {path!r}")
    parts = [part for part in path.split("/") if part][:-1]
    way = ["/"]
    for part in parts:
        way.append(posixpath.join(way[-1], part))
    return tuple(way)


def conflicts(root: FolderId, way: Collection[FolderId]) -> bool:
    """Whether a program writing under `root` could change the path through the folders `way`."""
    return root in way
