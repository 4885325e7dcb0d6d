"""A session's workspace roots: `cwd` and the editor's additional directories (ACP v1 Session Setup).

Each root is a workspace root with the same rules as `cwd`; `cwd` stays the base for relative paths. Roots
never nest: a folder inside another root would be two roots with one tree, whose walks, masks and binds
would overlap, and whose rules could disagree about the same file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from term2.domain.paths import is_within

MAX_ADDITIONAL = 32  # more than any editor's multi-root workspace holds; each costs a bind and a kept walk


def holding_root(path: str, roots: Iterable[str]) -> str | None:
    """The root `path` (canonical) lies in, or None outside them all."""
    for root in roots:
        if is_within(path, root):
            return root
    return None


def anchor(path: str, root: str, extra: Sequence[str] = ()) -> str:
    """The root a tool judges and opens `path` from: the one holding it, else `root` (the session's cwd).

    Outside every root the cwd anchors it, as before there were several: the file tools then open it from
    `/` and the workspace rule asks.
    """
    return holding_root(path, extra) or root


def overlap_reason(candidate: str, roots: Sequence[str]) -> str | None:
    """Why canonical `candidate` cannot join `roots` (canonical), or None when it may."""
    for root in roots:
        if candidate == root:
            return f"{candidate} is already a root of this session"
        if is_within(candidate, root):
            return f"{candidate} is inside {root}, another root of this session"
        if is_within(root, candidate):
            return f"{candidate} holds {root}, another root of this session"
    return None
