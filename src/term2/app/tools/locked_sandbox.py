"""Every sandboxed program holds its root's folder lock while it runs (ADR 0038).

A run_shell command or a run_code program can write anything under its root,
so it could swap a folder on the way to a path the editor is about to open.
Wrapping the Sandbox port (in the composition root) puts every program term2
starts behind the lock, whichever tool started it: the program waits for
editor requests in flight on paths through its root, and editor requests
made while it runs use the disk instead (through_client.py).
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from dataclasses import dataclass

import anyio.to_thread

from term2.domain.editor_exclusion import FolderId
from term2.ports.folder_locks import FolderLockError, FolderLocks
from term2.ports.sandbox import CommandRequest, CommandResult, OutputSink, Sandbox, SandboxFailed, SandboxStatus


@dataclass(frozen=True, slots=True)
class LockedSandbox:
    inner: Sandbox
    locks: FolderLocks

    async def run(self, request: CommandRequest, on_output: OutputSink | None = None) -> CommandResult:
        """The inner run, under the program lock of every root's identity (the root and its extra roots, each
        once, in one order); no lock, no run (SandboxFailed)."""
        folders: set[FolderId] = set()
        for path in (request.root, *request.extra_roots):
            try:
                info = await anyio.to_thread.run_sync(os.stat, path)
            except OSError as err:
                raise SandboxFailed(f"the workspace root {path!r} cannot be opened: {err}") from None
            folders.add(FolderId(info.st_dev, info.st_ino))
        async with AsyncExitStack() as stack:
            for folder in sorted(folders):
                try:
                    await stack.enter_async_context(self.locks.program(folder))
                except FolderLockError as err:
                    raise SandboxFailed(f"the workspace's folder lock could not be taken: {err}") from None
            return await self.inner.run(request, on_output)

    async def status(self) -> SandboxStatus:
        return await self.inner.status()
