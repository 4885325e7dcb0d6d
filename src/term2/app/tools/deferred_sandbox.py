"""The sandbox, made the first time a command runs: a first prompt that runs none never waits for it.

Making the bubblewrap sandbox imports its adapter, the workspace walks and the egress proxy (~12 ms on
the machines we measure), all before a turn part that builds it eagerly can answer its first prompt
(ADR 0053). It is made in a worker thread, once, whoever asks first; start-up also makes it once the
first turn is over (`Application.warm_after_turn`). A sandbox that cannot be made fails the command
that asked, as before: nothing runs without it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio.to_thread

from term2.ports.sandbox import CommandRequest, CommandResult, OutputSink, Sandbox, SandboxStatus


class DeferredSandbox:
    def __init__(self, make: Callable[[], Sandbox]) -> None:
        self._make = make
        self._made: Sandbox | None = None
        self._making = threading.Lock()

    def made(self) -> Sandbox:
        """The sandbox, made now if not yet (blocking: call it from a worker thread)."""
        with self._making:
            if self._made is None:
                self._made = self._make()
            return self._made

    async def _sandbox(self) -> Sandbox:
        return self._made if self._made is not None else await anyio.to_thread.run_sync(self.made)

    async def run(self, request: CommandRequest, on_output: OutputSink | None = None) -> CommandResult:
        return await (await self._sandbox()).run(request, on_output)

    async def status(self) -> SandboxStatus:
        return await (await self._sandbox()).status()
