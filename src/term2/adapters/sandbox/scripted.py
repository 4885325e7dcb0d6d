"""ScriptedSandbox: a deterministic in-memory Sandbox for callers' tests.

It never executes anything on the host. Each command string maps to a
``Script`` (output chunks, exit code, or a simulated hang/setup failure);
unknown commands answer like a shell would (exit 127). It follows the port's
contract (tests/contract/test_sandbox_contract.py runs against it and against
BubblewrapSandbox): output capped with ``truncated``, timeouts reported as
``timed_out`` with SIGKILL, cancellation honoured at once,
SandboxUnavailable when configured unavailable, and extra roots judged by the
real adapter's rule (``workspace_roots.extra_roots``: SandboxFailed, nothing run).
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio

from term2.adapters.sandbox.workspace_roots import extra_roots
from term2.ports.sandbox import (
    CommandRequest,
    CommandResult,
    OutputSink,
    SandboxFailed,
    SandboxStatus,
    SandboxUnavailable,
)


@dataclass(frozen=True, slots=True)
class Script:
    """What one command "does": chunks written (``chunk_delay_s`` apart), then exit.

    ``hang`` keeps it running after the chunks until timeout or cancellation;
    ``setup_failure`` makes the sandbox itself fail (SandboxFailed) instead;
    ``wait_for`` names a file in the request's cwd that must exist before each
    chunk after the first (as a shell's ``until [ -e go ]`` loop would), so a
    test can order the command's output after something it does itself.
    """

    chunks: tuple[bytes, ...] = ()
    exit_code: int = 0
    chunk_delay_s: float = 0.0
    hang: bool = False
    setup_failure: str | None = None
    # What the sandbox reports having done to the workspace after the command.
    notices: tuple[str, ...] = ()
    # Stands in for a run_code program: called in a worker thread with the bridge
    # socket (the request's bridge_fd); what it returns is the command's output.
    program: Callable[[socket.socket], bytes] | None = None
    wait_for: str | None = None


NOT_FOUND = Script(chunks=(b"scripted sandbox: command not found\n",), exit_code=127)


class ScriptedSandbox:
    """Canned results per command string; records every request in ``calls``."""

    def __init__(
        self,
        scripts: Mapping[str, Script] | None = None,
        *,
        unavailable: str | None = None,
    ) -> None:
        self._scripts = dict(scripts or {})
        self._unavailable = unavailable
        self.calls: list[CommandRequest] = []

    def add(self, command: str, script: Script) -> None:
        self._scripts[command] = script

    async def status(self) -> SandboxStatus:
        if self._unavailable is not None:
            return SandboxStatus(available=False, detail=self._unavailable)
        return SandboxStatus(available=True, detail="scripted sandbox (nothing is executed)")

    async def run(self, request: CommandRequest, on_output: OutputSink | None = None) -> CommandResult:
        if self._unavailable is not None:
            raise SandboxUnavailable(self._unavailable)
        if request.extra_roots:  # judged as the real adapter judges them, so callers' tests see the same refusals
            extra_roots(request.root, request.extra_roots, hidden=())
        self.calls.append(request)
        script = self._scripts.get(request.command, NOT_FOUND)
        if script.setup_failure is not None:
            raise SandboxFailed(script.setup_failure)
        if script.program is not None:
            return await self._run_program(request, script, on_output)
        output = bytearray()
        with anyio.move_on_after(request.timeout_s) as deadline:
            for index, chunk in enumerate(script.chunks):
                if index and script.chunk_delay_s:
                    await anyio.sleep(script.chunk_delay_s)
                while index and script.wait_for and not os.path.exists(os.path.join(request.cwd, script.wait_for)):
                    await anyio.sleep(0.01)
                room = request.output_limit - len(output)
                if room > 0 and chunk[:room]:
                    output += chunk[:room]
                    if on_output is not None:
                        await on_output(chunk[:room])
                if len(chunk) > room:  # the real adapter kills a flooding command
                    return CommandResult(
                        None,
                        signal.SIGKILL,
                        bytes(output),
                        truncated=True,
                        timed_out=False,
                    )
            if script.hang:
                await anyio.sleep_forever()
        if deadline.cancelled_caught:
            return CommandResult(None, signal.SIGKILL, bytes(output), truncated=False, timed_out=True)
        await anyio.lowlevel.checkpoint()
        return CommandResult(
            script.exit_code, None, bytes(output), truncated=False, timed_out=False, notices=script.notices
        )

    async def _run_program(
        self, request: CommandRequest, script: Script, on_output: OutputSink | None
    ) -> CommandResult:
        assert script.program is not None
        if request.bridge_fd is None:
            raise SandboxFailed("scripted program needs a bridge_fd")
        sock = socket.socket(fileno=os.dup(request.bridge_fd))
        try:
            with anyio.move_on_after(request.timeout_s) as deadline:
                output = await anyio.to_thread.run_sync(script.program, sock, abandon_on_cancel=True)
        finally:
            sock.close()
        if deadline.cancelled_caught:
            return CommandResult(None, signal.SIGKILL, b"", truncated=False, timed_out=True)
        truncated = len(output) > request.output_limit
        output = output[: request.output_limit]
        if on_output is not None and output:
            await on_output(output)
        if truncated:  # like the real adapter, a flooding program is killed
            return CommandResult(None, signal.SIGKILL, output, truncated=True, timed_out=False)
        return CommandResult(script.exit_code, None, output, truncated=False, timed_out=False, notices=script.notices)
