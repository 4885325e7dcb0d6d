"""Supervising one started bwrap: read its pipes, learn its child, kill the tree.

bwrap limits nothing by itself: the adapter caps output, enforces the timeout,
and kills. Killing has two halves because ``--new-session`` puts the command in
its own session: ``killpg`` on bwrap's group stops the monitor, and SIGKILL to
bwrap's child (the pid namespace's init, learnt from ``--json-status-fd``) tears
down every process in the namespace, daemonised or not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any

import anyio

from term2.adapters.sandbox.invocation import Identity
from term2.ports.sandbox import CommandResult, OutputSink, SandboxFailed
from term2.support.deferred_log import get_logger

_log = get_logger(__name__)

_READ_SIZE = 65536
# How long to wait for bwrap to go away after SIGKILL before giving up on it.
KILL_GRACE_S = 5.0


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class SandboxProcess:
    """A running bwrap with its merged output pipe and its json-status pipe."""

    def __init__(self, proc: subprocess.Popen[bytes], output_fd: int, status_fd: int) -> None:
        self.proc = proc
        self._output_fd = output_fd
        self._status_fd = status_fd
        os.set_blocking(output_fd, False)
        os.set_blocking(status_fd, False)
        # Our own unreaped child: its pid cannot be recycled before we wait.
        self._proc_pidfd = os.pidfd_open(proc.pid)
        self._child_pidfd: int | None = None
        self.records: list[dict[str, Any]] = []
        self.output = bytearray()
        self.truncated = False

    @property
    def exit_code(self) -> int | None:
        for record in self.records:
            code = record.get("exit-code")
            if isinstance(code, int):
                return code
        return None

    async def pump_status(self) -> None:
        """Read json-status records to EOF; pin bwrap's child with a pidfd."""
        buffer = b""
        while chunk := await self._read(self._status_fd):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self._record(line)
        self._record(buffer)

    def _record(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            record = json.loads(line)
        except ValueError:
            return
        if not isinstance(record, dict):
            return
        self.records.append(record)
        child = record.get("child-pid")
        if isinstance(child, int) and self._child_pidfd is None:
            try:
                pidfd = os.pidfd_open(child)
            except OSError:
                return
            # Only keep it if it is still bwrap's child, i.e. not a recycled pid.
            if _parent_of(child) == self.proc.pid:
                self._child_pidfd = pidfd
            else:
                os.close(pidfd)

    async def pump_output(self, limit: int, on_output: OutputSink | None) -> None:
        """Collect up to ``limit`` bytes, streaming them; past the cap, kill and stop."""
        while data := await self._read(self._output_fd):
            room = limit - len(self.output)
            chunk = data[:room]
            if chunk:
                self.output += chunk
                if on_output is not None:
                    await on_output(chunk)
            if len(data) > room:
                self.truncated = True
                self.kill()
                return

    async def _read(self, fd: int) -> bytes:
        while True:
            await anyio.wait_readable(fd)
            try:
                return os.read(fd, _READ_SIZE)
            except BlockingIOError:
                continue

    def kill(self) -> None:
        """SIGKILL bwrap's process group and the sandbox's init; idempotent.

        The group is only signalled while bwrap is unreaped (so its pid, which
        is the group id, cannot have been recycled); the init goes through a
        pidfd, which is immune to recycling.
        """
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._child_pidfd is not None:
            try:
                signal.pidfd_send_signal(self._child_pidfd, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass

    async def wait(self) -> int | None:
        """Wait for bwrap to exit (without blocking the loop) and reap it."""
        await anyio.wait_readable(self._proc_pidfd)
        return self.proc.wait()

    def drain_status(self) -> None:
        """Take the status records already written (the child's pid among them) without waiting: a run
        cancelled before its pump read them must still learn which init to wait for."""
        buffer = b""
        while True:
            try:
                chunk = os.read(self._status_fd, _READ_SIZE)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            buffer += chunk
        for line in buffer.split(b"\n"):
            self._record(line)

    async def wait_namespace(self) -> None:
        """Wait until the sandbox's init has exited.

        bwrap's own exit says nothing of its child: with bwrap killed, the init learns of it through its
        parent-death signal, and only its exit tears the namespace down (the kernel kills every process
        in it and waits for them before the init's exit is reported, which is when its pidfd turns
        readable). Until then a command's processes may still run, so whatever the caller does next
        (release the root's folder lock, walk the tree) waits for this (ADR 0038).
        """
        if self._child_pidfd is not None:
            await anyio.wait_readable(self._child_pidfd)

    def reap_if_done(self) -> int | None:
        return self.proc.poll()

    def close(self) -> None:
        for fd in (
            self._output_fd,
            self._status_fd,
            self._proc_pidfd,
            self._child_pidfd,
        ):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._child_pidfd = None


async def finish(box: SandboxProcess) -> None:
    """Make sure nothing of the run survives, then release its fds."""
    if box.reap_if_done() is None:
        box.kill()
        with anyio.move_on_after(KILL_GRACE_S):
            await box.wait()
    else:
        box.kill()  # bwrap is gone; its namespace init must be too
    if box.reap_if_done() is None:
        _log.error("sandbox.unkillable", pid=box.proc.pid)
    box.drain_status()
    box.kill()  # the init too, now that its pid is surely known
    with anyio.move_on_after(KILL_GRACE_S) as waited:
        await box.wait_namespace()
    if waited.cancelled_caught:
        _log.error("sandbox.namespace_outlived_bwrap", pid=box.proc.pid)
    box.close()


def result_of(box: SandboxProcess, timed_out: bool, identity: Identity) -> CommandResult:
    """The command's result from a finished box, or SandboxFailed when bwrap itself never started it."""
    output = bytes(box.output)
    if timed_out:
        return CommandResult(
            exit_code=None,
            signal=signal.SIGKILL,
            output=output,
            truncated=box.truncated,
            timed_out=True,
        )
    code = box.exit_code
    if code is not None:
        return CommandResult(
            exit_code=code,
            signal=None,
            output=output,
            truncated=box.truncated,
            timed_out=False,
        )
    if box.truncated:  # we killed it for flooding before it could report
        return CommandResult(
            exit_code=None,
            signal=signal.SIGKILL,
            output=output,
            truncated=True,
            timed_out=False,
        )
    message = output.decode(errors="replace").strip()[-2000:] or f"bwrap exited {box.proc.returncode}"
    if identity.drop_to is not None:
        message += (
            f" (bwrap ran as uid {identity.drop_to[0]}, the workspace owner; every directory "
            "above the workspace must be searchable by that user)"
        )
    raise SandboxFailed(f"the sandbox could not start the command: {message}")
