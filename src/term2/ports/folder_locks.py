"""Folder locks port: sandboxed programs and editor requests on the same folders never overlap (ADR 0038).

Two kinds of holders, each shared among its own kind: programs term2 runs
on a writable root (run_shell commands, run_code programs), and requests
term2 sends to the editor on a path. A program on a root conflicts with an
editor request whose way (the folders from `/` to the path's parent) holds
that root (`domain.editor_exclusion.conflicts`). The editor side never
waits: while a conflicting program runs, the call uses the disk, safe by
descriptors. The program side waits for conflicting editor requests in
flight, which are bounded. Holders in other term2 processes of the same user
count too, where the adapter can see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from term2.domain.editor_exclusion import FolderId


class FolderLockError(Exception):
    """A program's lock could not be taken; the program must not run (nothing else could hold editors off)."""


class FolderLocks(Protocol):
    def program(self, root: FolderId) -> AbstractAsyncContextManager[None]:
        """Held while a program may write under `root`; entering waits out conflicting editor requests.

        Entering raises FolderLockError when the lock cannot be taken. Cancellable while it waits.
        """
        ...

    def editor(self, way: Sequence[FolderId]) -> AbstractAsyncContextManager[bool]:
        """Try to hold programs off every folder of `way` for one editor request; never waits for a program.

        Yields True when held; False when a conflicting program runs or the lock cannot be taken: then the
        editor must not be asked, and the disk serves the call.
        """
        ...
