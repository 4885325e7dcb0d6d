"""Sandbox port: run one shell command confined to a workspace root.

There is deliberately no way to ask for an unconfined run. An adapter that
cannot confine a command raises SandboxUnavailable; a confinement that failed
to set up raises SandboxFailed. Neither is ever reported as the command's own
result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from term2.domain.network import NetworkGrant


class SandboxUnavailable(Exception):
    """The sandbox cannot run on this machine (no bwrap, user namespaces refused...)."""


class SandboxFailed(Exception):
    """The sandbox itself failed to set up; the command never started."""


@dataclass(frozen=True, slots=True)
class CommandRequest:
    command: str
    root: str  # canonical workspace root holding cwd; with extra_roots, the only writable host paths
    cwd: str  # canonical folder the command starts in
    timeout_s: float = 120.0
    output_limit: int = 256 * 1024
    # One end of a socket pair the command inherits (as TERM2_BRIDGE_FD): run_code's
    # only channel to the agent. No other descriptor ever crosses into the sandbox.
    bridge_fd: int | None = None
    # The hosts the user approved for this one command (ADR 0030). None: no network at all, only the
    # namespace's own loopback. Set: still that namespace, plus term2's filtering proxy for these hosts.
    network: NetworkGrant | None = None
    # The command runs without the user having been asked (the `auto` mode, ADR 0044): the project's
    # instruction files are read-only for it, and any it creates or replaces is quarantined after it,
    # so that no unasked command can steer later sessions (a change the user allowed is only reported).
    guard_instructions: bool = False
    # The session's other workspace roots (ACP additionalDirectories), canonical, none inside or holding
    # `root` or each other: bound writable at their real paths with the same masks, protection and walks.
    # Each is judged as `root` is (an unsafe, missing, overlapping one, or one of another owner than
    # `root`'s, fails the run with SandboxFailed before anything runs), for a root judged or walked
    # more loosely would be the way around every rule the root keeps (ADR 0050).
    extra_roots: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    signal: int | None
    output: bytes  # stdout and stderr interleaved, at most output_limit bytes
    truncated: bool
    timed_out: bool
    # What the sandbox did to the workspace after the command, for the model and
    # the user to read (e.g. planted git metadata it quarantined).
    notices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    available: bool
    detail: str
    # Network by approval (ADR 0030): "ok: …" or why commands asking for hosts will fail; None: not checked.
    network: str | None = None
    # How the walks around each command are done (ADR 0031, 0033): kept between commands, or in full; None: not checked.
    walks: str | None = None


OutputSink = Callable[[bytes], Awaitable[None]]


class Sandbox(Protocol):
    async def run(self, request: CommandRequest, on_output: OutputSink | None = None) -> CommandResult:
        """Run to completion, timeout or cancellation; a cancelled run kills the whole tree."""
        ...

    async def status(self) -> SandboxStatus:
        """Probe whether commands can run here, and why not."""
        ...
