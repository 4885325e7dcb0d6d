"""A Sandbox port double that returns whatever CommandResult a test sets.

The ScriptedSandbox adapter follows the port's contract, so it can only end a
command the ways a real sandbox does; tool tests also need results it never
makes up on its own (an arbitrary signal, a truncated run that still exited),
to pin how each one is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from term2.ports.sandbox import CommandRequest, CommandResult, OutputSink, SandboxStatus


@dataclass
class CannedSandbox:
    """Records requests; streams `chunks`, then returns `result` or raises `error`.

    `hang` keeps the command running after the chunks, until cancelled. A
    request that raises `error` is not recorded: it never ran.
    """

    result: CommandResult = field(default_factory=lambda: CommandResult(0, None, b"ok\n", False, False))
    chunks: tuple[bytes, ...] = (b"ok\n",)
    error: Exception | None = None
    hang: bool = False
    commands: list[CommandRequest] = field(default_factory=list)

    async def run(self, request: CommandRequest, on_output: OutputSink | None = None) -> CommandResult:
        if self.error is not None:
            raise self.error
        self.commands.append(request)
        for chunk in self.chunks:
            if on_output is not None:
                await on_output(chunk)
        if self.hang:
            await anyio.sleep_forever()
        return self.result

    async def status(self) -> SandboxStatus:
        return SandboxStatus(True, "canned sandbox (nothing is executed)")
