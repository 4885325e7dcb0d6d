"""Folder locks in memory: the alternate adapter of the folder locks port (one process, no files).

Counts programs and editor requests per folder identity; a program is counted
before it waits, so editors arriving while it waits for the ones in flight
use the disk, as with the flock adapter. `programs_seen` records each root a
program ran on, so tests can tell the lock was taken.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from term2.domain.editor_exclusion import FolderId, conflicts


@dataclass
class MemoryFolderLocks:
    programs: Counter[FolderId] = field(default_factory=Counter)
    editors: Counter[FolderId] = field(default_factory=Counter)
    programs_seen: list[FolderId] = field(default_factory=list)
    _released: anyio.Event | None = None  # made inside the event loop, where anyio can make it

    @asynccontextmanager
    async def program(self, root: FolderId) -> AsyncIterator[None]:
        self.programs[root] += 1
        try:
            while self.editors[root]:
                if self._released is None:
                    self._released = anyio.Event()
                await self._released.wait()
            self.programs_seen.append(root)
            yield
        finally:
            self.programs[root] -= 1

    @asynccontextmanager
    async def editor(self, way: Sequence[FolderId]) -> AsyncIterator[bool]:
        keys = set(way)
        if any(conflicts(root, keys) for root, count in self.programs.items() if count):
            yield False
            return
        self.editors.update(keys)
        try:
            yield True
        finally:
            self.editors.subtract(keys)
            if self._released is not None:
                self._released.set()
                self._released = None
