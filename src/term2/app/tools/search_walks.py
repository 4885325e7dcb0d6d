"""What grep, glob and list_dir share in asking the workspace search port for a walk.

The port (ports/workspace_search.py, ADR 0032) walks and matches; the tools
decide the rest. Here: the top is checked through descriptors just before a
walk (a folder swapped for a link since it was judged fails plainly, ADR
0009), results are the first N in one stated order whatever the engine's
order (collected unordered and sorted here up to SORT_HERE times the cap,
else asked for in order and stopped at the cap), and paths are shown
relative to the root the way the model passes them back.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from term2.app.tools.anchored import lstat_in, open_folder, open_parent, require_regular
from term2.app.tools.failure import ToolFailed
from term2.app.tools.names import shown
from term2.domain.workspace import is_within
from term2.ports.workspace_search import LineMatch, Walk, WalkEnd, WorkspaceSearch

TIME_LIMIT = 30.0
# Results are collected from an unordered (parallel) walk and sorted here up to this many times a
# tool's cap; past it, the walk runs again in order (one thread, for rg) and stops at the cap.
SORT_HERE = 20
ORDER = "path order (compared folder name by folder name, in byte order)"

_SEPARATOR_FIRST = bytes.maketrans(b"/", b"\0")
T = TypeVar("T", bytes, LineMatch)


def path_order(path: bytes) -> bytes:
    """A key giving the port's path order (name by name) in one C call.

    Comparing names one by one is comparing the bytes with `/` as the
    smallest byte, and `\\0` is a byte no name holds: ~10x faster than
    splitting every path into a list of names.
    """
    return path.translate(_SEPARATOR_FIRST)


def _order(item: bytes | LineMatch) -> tuple[bytes, int]:
    if isinstance(item, LineMatch):
        return path_order(item.path), item.line
    return path_order(item), 0


def engine(search: WorkspaceSearch | None, tool: str) -> WorkspaceSearch:
    """The toolbox's workspace search; a toolbox built without one (specs only) fails closed."""
    if search is None:
        raise ToolFailed(f"{tool} cannot search here: this toolbox was built without a workspace search")
    return search


def check_top(top: str, root: str) -> None:
    """Refuse a top that changed since it was judged (swapped for a link), or a special file: nothing runs."""
    if os.path.isdir(top) and not os.path.islink(top):
        os.close(open_folder(top, root))
    else:
        folder_fd, name = open_parent(top, root)
        try:
            require_regular(lstat_in(folder_fd, name, top), top, "searched")
        finally:
            os.close(folder_fd)


def shown_under(top: str, root: str) -> Callable[[bytes], str]:
    """A function from a path the walk returned (relative to `top`) to the path the model sees.

    Relative to the root inside it, absolute outside it. The prefix is
    worked out once: canonicalizing the root for every result costs more
    than the whole walk for a thousand of them.
    """
    base = top if os.path.isdir(top) else os.path.dirname(top)
    canonical = os.path.realpath(root)
    prefix = os.path.relpath(base, canonical) if is_within(base, canonical) else base
    prefix = "" if prefix == "." else prefix.rstrip("/") + "/"

    def one(path: bytes) -> str:
        return shown(prefix + os.fsdecode(path))

    return one


@dataclass(slots=True)
class First(Generic[T]):
    """The first `limit` results in path order; `more`: some were left out after them."""

    items: list[T]
    more: bool
    end: WalkEnd


class _Collect(Generic[T]):
    def __init__(self, limit: int, keep: Callable[[T], bool] | None) -> None:
        self.limit = limit
        self.keep: Callable[[T], bool] | None = keep
        self.items: list[T] = []
        self.more = False

    def take(self, item: T) -> bool:
        if self.keep is not None and not self.keep(item):
            return True
        if len(self.items) == self.limit:
            self.more = True
            return False
        self.items.append(item)
        return True


async def first_in_order(
    run: Callable[[Walk, Callable[[T], bool]], Awaitable[WalkEnd]],
    walk: Walk,
    limit: int,
    keep: Callable[[T], bool] | None = None,
) -> First[T]:
    """The first `limit` results of `run` (files or lines) that `keep` accepts, in path order."""
    collected: _Collect[T] = _Collect(limit * SORT_HERE, keep)
    end = await run(walk, collected.take)
    if collected.more:  # too many to sort here: the engine orders them and stops at the limit
        collected = _Collect(limit, keep)
        end = await run(replace(walk, ordered=True), collected.take)
        return First(collected.items, collected.more, end)
    paths = bool(collected.items) and isinstance(collected.items[0], bytes)
    key: Callable[[Any], Any] = path_order if paths else _order  # paths alone: no tuple made for each
    items = sorted(collected.items, key=key)
    return First(items[:limit], len(items) > limit, end)
